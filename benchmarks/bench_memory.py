"""Extra peak memory of low-memory (streaming) rollout vs `output_attentions=True`.

Model: BERT-base shape (12 layers, 12 heads, hidden 768, intermediate 3072) with 4096 positions and
random weights, fp32, CPU, batch 1. Each configuration runs in a fresh subprocess that builds the
model, warms it up on 16 tokens, resets the peak-RSS counter (/proc/self/clear_refs) and then
measures VmHWM - VmRSS around one explanation (rollout of the whole stack, CLS row after every
layer). The plain path runs under an address-space cap (RLIMIT_AS), so that an out-of-memory ends
as "failed" instead of taking the shared machine down.

glibc's malloc keeps freed blocks of up to 32 MiB on its heap once its mmap threshold has grown, so
the peak RSS of a run that allocates and frees many n x n matrices swings between runs (201 to 530
MiB for the same streaming run at 2048 tokens). Children therefore run with
MALLOC_MMAP_THRESHOLD_=1048576 (every block of 1 MiB or more is mapped and returned when freed), the
same for every mode, so the figures are the memory the computation holds; --default-malloc turns
that off.

Modes:
  eager    eager forward, no attentions kept (the plain path's own forward; reference)
  sdpa     SDPA forward, no attentions kept (the streaming path's own forward; reference)
  attn     eager forward with output_attentions=True, nothing else: the attentions it keeps (the
           comparison the ratio uses, independent of how the rollout is then computed)
  plain    the project's plain path: output_attentions=True, then attention_rollout (final matrix)
  stream   rollout_core.lowmem.streaming_rollout (SDPA outputs, blocked probabilities)

Run: python benchmarks/bench_memory.py [--quick] [--cap-gb 8]
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Callable

ROOT = Path(__file__).resolve().parents[1]
MODEL = dict(hidden_size=768, num_hidden_layers=12, num_attention_heads=12, intermediate_size=3072,
             max_position_embeddings=4096, vocab_size=1000)
MODES = ("eager", "sdpa", "attn", "plain", "stream")


def _status_kib(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise KeyError(field)


def _child(mode: str, n: int, cap_bytes: int) -> dict:
    """Runs in the subprocess: build, warm up, reset the peak, measure one explanation."""
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    import torch
    import transformers

    torch.set_num_threads(1)
    sys.path.insert(0, str(ROOT))
    from rollout_core.lowmem import streaming_rollout
    from rollout_core.maths.rollout import attention_rollout

    torch.manual_seed(0)
    config = transformers.BertConfig(**MODEL, attn_implementation="eager")
    model = transformers.BertModel(config).eval()
    handle = type("Handle", (), {"model": model, "device": torch.device("cpu")})()

    def run(length: int) -> None:
        inputs = {"input_ids": torch.randint(5, MODEL["vocab_size"], (1, length))}
        with torch.no_grad():
            if mode in ("eager", "sdpa"):
                model.config._attn_implementation = mode
                model(**inputs)
            elif mode == "attn":
                model(**inputs, output_attentions=True)
            elif mode == "plain":
                attention_rollout(model(**inputs, output_attentions=True).attentions)
            else:
                streaming_rollout(handle, inputs, rows=[0])

    run(16)
    _, measured = measure_peak(lambda: run(n), cap_bytes)
    return {"mode": mode, "n": n, **measured}


def measure_peak(run: Callable[[], Any], cap_bytes: int) -> tuple[Any, dict]:
    """Call `run` once with the peak RSS reset first, under an address-space cap of `cap_bytes` above the
    current size (0: none): (its result, {"extra_mib", "seconds"}), or (None, {"failed": reason})."""
    if cap_bytes:
        limit = _status_kib("VmSize") * 1024 + cap_bytes
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    Path("/proc/self/clear_refs").write_text("5")  # reset VmHWM to the current RSS
    before = _status_kib("VmRSS")
    start = time.perf_counter()
    try:
        result = run()
    except (RuntimeError, MemoryError) as err:
        return None, {"failed": str(err).splitlines()[0][:120]}
    seconds = time.perf_counter() - start
    return result, {"extra_mib": (_status_kib("VmHWM") - before) / 1024, "seconds": seconds}


def measure_child(script: str, args: list[str], env: dict[str, str], fixed_malloc: bool = True) -> dict:
    """Run `script --child *args` in a fresh interpreter and return the JSON line it prints last."""
    cmd = [sys.executable, script, "--child", *args]
    env = {**os.environ, "HF_HUB_OFFLINE": "1", **env}
    if fixed_malloc:
        env["MALLOC_MMAP_THRESHOLD_"] = str(2**20)
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env)
    lines = [line for line in proc.stdout.splitlines() if line.startswith("{")]
    if proc.returncode != 0 or not lines:
        return {"failed": (proc.stderr.strip().splitlines() or [f"exit {proc.returncode}"])[-1][:120]}
    return json.loads(lines[-1])


def _measure(mode: str, n: int, cap_bytes: int, fixed_malloc: bool) -> dict:
    result = measure_child(__file__, [mode, str(n), str(cap_bytes)], {"OMP_NUM_THREADS": "1"}, fixed_malloc)
    return {"mode": mode, "n": n, **result}


def _cell(result: dict) -> str:
    return "failed" if "failed" in result else f"{result['extra_mib']:.0f} MiB ({result['seconds']:.1f} s)"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="2048 and 4096 tokens only (the two targets)")
    parser.add_argument("--cap-gb", type=float, default=8.0, help="address-space cap per run above the loaded model")
    parser.add_argument("--default-malloc", action="store_true", help="leave glibc's dynamic mmap threshold on")
    parser.add_argument("--child", nargs=3, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        mode, n, cap = args.child
        print(json.dumps(_child(mode, int(n), int(cap))))
        return

    sys.path.insert(0, str(ROOT))
    from rollout_core.lowmem import estimate_full_capture_bytes

    lengths = (2048, 4096) if args.quick else (1024, 2048, 4096)
    cap = int(args.cap_gb * 2**30)
    print(f"BERT-base shape, random weights: {MODEL['num_hidden_layers']} layers, "
          f"{MODEL['num_attention_heads']} heads, "
          f"hidden {MODEL['hidden_size']}, {MODEL['max_position_embeddings']} positions; fp32, batch 1, 1 thread; "
          f"cap {args.cap_gb:g} GiB above the loaded model per run; "
          + ("glibc default malloc" if args.default_malloc else "MALLOC_MMAP_THRESHOLD_=1 MiB in every run"))
    print("extra peak RSS above the loaded model (time of the run); ratio = output_attentions / streaming;")
    print("capture-only ratio = (output_attentions - eager forward) / (streaming - SDPA forward)")
    header = (f"{'tokens':>6} | {'eager forward':>18} | {'SDPA forward':>18} | {'output_attentions':>18} | "
              f"{'+ attention_rollout':>19} | {'streaming':>18} | {'ratio':>6} | capture-only | kept attentions")
    print(header)
    print("-" * len(header))
    for n in lengths:
        results = {mode: _measure(mode, n, cap, not args.default_malloc) for mode in MODES}
        plain, stream = results["attn"], results["stream"]
        ratio = capture_only = "n/a"
        if "failed" not in plain and "failed" not in stream:
            ratio = f"{plain['extra_mib'] / stream['extra_mib']:.1f}x"
            if "failed" not in results["eager"] and "failed" not in results["sdpa"]:
                own = stream["extra_mib"] - results["sdpa"]["extra_mib"]
                capture_only = f"{(plain['extra_mib'] - results['eager']['extra_mib']) / max(own, 1.0):.1f}x"
        elif "failed" in plain and "failed" not in stream:
            ratio = f">{cap / 2**20 / stream['extra_mib']:.0f}x"  # the plain path needed more than the cap
        kept = estimate_full_capture_bytes(MODEL["num_hidden_layers"], MODEL["num_attention_heads"], n) / 2**20
        cells = " | ".join(f"{_cell(results[mode]):>{19 if mode == 'plain' else 18}}" for mode in MODES)
        print(f"{n:>6} | {cells} | {ratio:>6} | {capture_only:>12} | {kept:.0f} MiB", flush=True)
        for result in results.values():
            if "failed" in result:
                print(f"         {result['mode']} at {n} failed under the cap: {result['failed']}")


if __name__ == "__main__":
    main()
