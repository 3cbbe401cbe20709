"""The explain path against a plain forward pass and against the naive way, side by side in one run (issue 29).

For default-text at 32, 128 and 512 tokens and default-image (257 tokens), in one process, one torch thread:
- `forward`: the processor on the same text or image, then an eager `model(**inputs)` under `torch.no_grad()`
  (no attentions asked for): the price of a prediction;
- `explain`: `explain_text(handle, text, method="rollout")` / `explain_image(...)`, default settings, the whole
  path to an `Explanation` (tokenising, capture, rollout, per-layer rows, sinks, settings, warnings);
- `naive`: the jacobgil/vit-explain way on the same input: the processor, `output_attentions=True`, then a Python
  loop per layer of head mean, + identity, / 2, row renormalisation (`keepdim`: vit-explain's own `a / a.sum(-1)`
  divides columns), matmul into the running product; its final [CLS] row is compared with row 0 of our matrix
  ("row diff");
- `maths alone`: `attention_rollout(all_layers=True)` on already captured attentions (what earlier figures in
  RESULTS.md called the overhead).
The three ways run interleaved (forward, explain, naive, maths in every round) and the medians are compared, so a
load change during the run hits all of them; each call's wall time and its process CPU time are both recorded and
shown (wall medians; CPU medians; CPU minimums: on a shared machine the CPU time is what other jobs move least, and
they only ever add to it). Peak memory: each way runs once in a fresh subprocess (model loaded,
warmed up on 8 tokens (an image: the same image), freed memory returned by malloc_trim, peak-RSS counter reset
through /proc/self/clear_refs), extra peak RSS = VmHWM - VmRSS before the call; malloc at glibc's defaults unless
MALLOC_* is set in the environment (printed).

Run: flock /tmp/bench.lock python benchmarks/bench_explain_path.py [--rounds 15] [--no-memory | --memory-only]
[--bert-base] [--tokens 32 ...] [--no-image] (--tokens / --no-image: which inputs the timings take, e.g. many rounds of
one size.) (--bert-base: peak memory also on a BERT-base-shaped random classifier at 1024 tokens.)
"""
from __future__ import annotations

import argparse
import functools
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Callable

ROOT = Path(__file__).resolve().parents[1]
SIZES = (32, 128, 512)
WORDS = "the film was good but the plot was slow and the music was fun to hear".split()


def _text_of(processor: Any, tokens: int) -> str:
    """A text that the processor turns into exactly `tokens` ids (specials included)."""
    words: list[str] = []
    while len(processor(" ".join(words))["input_ids"]) < tokens:
        words.append(WORDS[len(words) % len(WORDS)])
    text = " ".join(words)
    if len(processor(text)["input_ids"]) != tokens:
        raise SystemExit(f"could not build a text of exactly {tokens} tokens")
    return text


def _image() -> Any:
    from rollout_core.data.shapes import generate

    return generate(1, seed=321, split="test")[0].image


def _model_inputs(handle: Any, item: Any) -> dict[str, Any]:
    if handle.modality == "text":
        return dict(handle.processor([item], return_tensors="pt"))
    return dict(handle.processor(images=item, return_tensors="pt"))


def _forward(handle: Any, item: Any) -> Any:
    import torch

    with torch.no_grad():
        return handle.model(**_model_inputs(handle, item))


def _explain(handle: Any, item: Any) -> Any:
    import rollout_core

    if handle.modality == "text":
        return rollout_core.explain_text(handle, item, method="rollout")
    return rollout_core.explain_image(handle, item, method="rollout")


def _naive(handle: Any, item: Any) -> Any:
    """jacobgil/vit-explain's rollout (discard_ratio 0, mean fusion) over transformers' attentions; the explained
    row ([CLS], row 0) of the final product. Row renormalisation with keepdim (the correct rollout)."""
    import torch

    with torch.no_grad():
        attentions = handle.model(**_model_inputs(handle, item), output_attentions=True).attentions
        n = attentions[0].shape[-1]
        result = torch.eye(n)
        for attention in attentions:
            fused = attention.mean(dim=1)
            eye = torch.eye(n)
            a = (fused + 1.0 * eye) / 2
            a = a / a.sum(dim=-1, keepdim=True)
            result = torch.matmul(a, result)
    return result[0, 0]


def _maths_alone(attentions: Any) -> Any:
    from rollout_core.maths.rollout import attention_rollout

    return attention_rollout(attentions, all_layers=True)


def _cases(sizes: tuple[int, ...] = SIZES, image: bool = True) -> list[tuple[str, Any, Any]]:
    """(label, handle, item) for each size of default-text and for default-image (unless `image` is False)."""
    import rollout_core

    cases = []
    text = rollout_core.load_model("default-text")
    for tokens in sizes:
        cases.append((f"default-text, {tokens} tokens", text, _text_of(text.processor, tokens)))
    if image:
        cases.append(("default-image, 257 tokens", rollout_core.load_model("default-image"), _image()))
    return cases


def _median_ms(samples: list[float]) -> float:
    return statistics.median(samples) * 1000


def _least_ms(samples: list[float]) -> float:
    return min(samples) * 1000


def _timings(rounds: int, sizes: tuple[int, ...], image: bool) -> None:
    import numpy as np
    import torch

    print(f"{'input':<28} {'forward':>9} {'explain':>9} {'naive':>9} {'maths':>8} | {'explain/fwd':>11} "
          f"{'naive/ours':>10} {'maths/fwd':>9} | row diff")
    wall: list[str] = []
    cpu_rows: list[str] = []
    cpu_least: list[str] = []
    for label, handle, item in _cases(sizes, image):
        with torch.no_grad():
            attentions = handle.model(**_model_inputs(handle, item), output_attentions=True).attentions
        ways: dict[str, Callable[[], Any]] = {
            "forward": functools.partial(_forward, handle, item), "explain": functools.partial(_explain, handle, item),
            "naive": functools.partial(_naive, handle, item), "maths": functools.partial(_maths_alone, attentions)}
        for call in ways.values():  # warm-up: lazy imports, first-call allocations
            call()
        seconds: dict[str, list[float]] = {name: [] for name in ways}
        cpu: dict[str, list[float]] = {name: [] for name in ways}
        for _ in range(rounds):
            for name, call in ways.items():
                start, start_cpu = time.perf_counter(), time.process_time()
                call()
                seconds[name].append(time.perf_counter() - start)
                cpu[name].append(time.process_time() - start_cpu)
        ours, naive_row = _explain(handle, item), _naive(handle, item)
        diff = float(np.abs(np.asarray(ours.matrix)[0] - naive_row.double().numpy()).max())
        for table, samples, statistic in ((wall, seconds, _median_ms), (cpu_rows, cpu, _median_ms),
                                          (cpu_least, cpu, _least_ms)):
            ms = {name: statistic(s) for name, s in samples.items()}
            table.append(f"{label:<28} {ms['forward']:7.1f}ms {ms['explain']:7.1f}ms {ms['naive']:7.1f}ms "
                         f"{ms['maths']:6.1f}ms | {ms['explain'] / ms['forward']:10.2f}x "
                         f"{ms['naive'] / ms['explain']:10.2f} {ms['maths'] / ms['forward']:8.1%} | {diff:.1e}")
    print("\n".join(wall))
    print("the same calls in process CPU time (what other jobs on a shared machine move least), medians")
    print("\n".join(cpu_rows))
    print("the same calls in process CPU time, the least of the rounds (other jobs only ever add to a call's time)")
    print("\n".join(cpu_least))


# ----------------------------------------------------------------------------------------------
# Peak memory, one fresh process per way and input


def _status(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) * 1024
    raise RuntimeError(f"{field} not in /proc/self/status")


BERT_BASE = dict(hidden_size=768, num_hidden_layers=12, num_attention_heads=12, intermediate_size=3072,
                 max_position_embeddings=1024)
BERT_BASE_TOKENS = 1024


def _build_bert_base(folder: Path) -> None:
    """A BERT-base-shaped classifier with random weights and default-text's tokenizer (1024 positions), in `folder`:
    the size where the issue measured our full capture 24% above the naive loop."""
    import torch
    import transformers

    import rollout_core

    tokenizer = rollout_core.load_model("default-text").processor
    tokenizer.model_max_length = BERT_BASE_TOKENS
    torch.manual_seed(0)
    config = transformers.BertConfig(**BERT_BASE, vocab_size=tokenizer.vocab_size, num_labels=2)
    transformers.BertForSequenceClassification(config).eval().save_pretrained(folder)
    tokenizer.save_pretrained(folder)


def _trim() -> None:
    import ctypes
    import ctypes.util

    ctypes.CDLL(ctypes.util.find_library("c")).malloc_trim(0)


def _measure_peak(way: str, case: str) -> None:
    """Runs in the subprocess: one way on case `case` (an index of `_cases`, or a BERT-base folder), its extra peak
    RSS as JSON on stdout."""
    import torch

    torch.set_num_threads(1)
    if Path(case).is_dir():
        import rollout_core

        handle = rollout_core.load_model(case)
        label, item = f"BERT-base shape, {BERT_BASE_TOKENS} tokens", _text_of(handle.processor, BERT_BASE_TOKENS)
    else:
        label, handle, item = _cases()[int(case)]
    call = {"explain": _explain, "naive": _naive, "forward": _forward}[way]
    small = _text_of(handle.processor, 8) if handle.modality == "text" else item
    call(handle, small)  # lazy imports and first-call allocations
    _trim()  # the warm-up's freed memory back to the system, so the call is not served from it (an image's
    # warm-up is the same image: without this the second call of a way reused its own first call's heap)
    Path("/proc/self/clear_refs").write_text("5")
    before = _status("VmRSS")
    call(handle, item)
    print(json.dumps({"label": label, "way": way, "extra": _status("VmHWM") - before}))


def _memory(bert_base: bool) -> None:
    import tempfile

    print(f"\nextra peak RSS of one call in a fresh process\n{'input':<28} {'forward':>10} {'explain':>10} "
          f"{'naive':>10} | explain/naive")
    folder = tempfile.TemporaryDirectory()
    cases = [str(case) for case in range(len(SIZES) + 1)]
    if bert_base:
        _build_bert_base(Path(folder.name))
        cases.append(folder.name)
    for case in cases:
        found: dict[str, int] = {}
        label = ""
        for way in ("forward", "explain", "naive"):
            out = subprocess.run([sys.executable, __file__, "--peak", way, case], capture_output=True, text=True,
                                 env={**os.environ, "PYTHONPATH": os.environ.get("PYTHONPATH", str(ROOT))}, check=True)
            row = json.loads(out.stdout.strip().splitlines()[-1])
            found[way], label = row["extra"], row["label"]
        mib = {k: v / 2**20 for k, v in found.items()}
        print(f"{label:<28} {mib['forward']:6.1f} MiB {mib['explain']:6.1f} MiB {mib['naive']:6.1f} MiB | "
              f"{found['explain'] / max(found['naive'], 1):.2f}")
    folder.cleanup()


def _settings() -> None:
    import torch
    import transformers

    malloc = {k: v for k, v in os.environ.items() if k.startswith("MALLOC_")} or "glibc defaults (no MALLOC_* set)"
    print(f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; torch {torch.__version__}, transformers "
          f"{transformers.__version__}, Python {platform.python_version()}; torch threads {torch.get_num_threads()}; "
          f"malloc: {malloc}; load average {' '.join(Path('/proc/loadavg').read_text().split()[:3])}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=15, help="interleaved rounds per input (median taken)")
    parser.add_argument("--quick", action="store_true", help="32 and 128 tokens and the image only, 5 rounds")
    parser.add_argument("--tokens", type=int, nargs="+", default=list(SIZES), metavar="N",
                        help=f"default-text sizes of the timings (default {' '.join(map(str, SIZES))})")
    parser.add_argument("--no-image", action="store_true", help="timings without default-image")
    parser.add_argument("--no-memory", action="store_true", help="skip the peak-memory subprocesses")
    parser.add_argument("--memory-only", action="store_true", help="only the peak-memory subprocesses")
    parser.add_argument("--bert-base", action="store_true",
                        help=f"also peak memory on a BERT-base-shaped random model at {BERT_BASE_TOKENS} tokens")
    parser.add_argument("--peak", nargs=2, metavar=("WAY", "CASE"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    if "PYTHONPATH" not in os.environ:
        sys.path.insert(0, str(ROOT))
    if args.peak:
        _measure_peak(args.peak[0], args.peak[1])
        return
    import torch

    torch.set_num_threads(1)
    _settings()
    print("forward = processor + eager model(**inputs) under no_grad; explain = explain_text/explain_image(method="
          "'rollout'); naive = processor + output_attentions=True + vit-explain's per-layer loop; maths = "
          "attention_rollout(all_layers=True) on captured attentions; medians of interleaved rounds")
    if not args.memory_only:
        sizes = SIZES[:2] if args.quick else tuple(args.tokens)
        _timings(5 if args.quick else args.rounds, sizes, not args.no_image)
    if not args.no_memory:
        _memory(args.bert_base)
    print("load average at the end: " + " ".join(Path("/proc/loadavg").read_text().split()[:3]))


if __name__ == "__main__":
    main()
