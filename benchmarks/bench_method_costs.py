"""Every registered method's cost estimate (`MethodSpec.seconds` on `serving.budget.workload`, as the pages and the
budget count a request) beside its measured time, on the embedded models at a few sizes: default-text on texts of
16-256 tokens, default-image and dinov2-small on a 224 px example image (257 positions, 12 layers), shapes-vit-tiny
(64 px, 4 layers). Each time is a whole `explain_text` / `explain_image` call as the pages make it (forward pass
included), the least of `--repeat` runs after a warm-up at the smallest size; cases estimated over `--max-seconds`
are listed, not run. Then the Corpus page's case: 100 generated rows on default-text in batches of 16
(`serving.budget.corpus_batches` summed, against `corpus.engine.explain_in_batches`). Prints estimate / measured
per case and, per method, the range of the ratio (the target: within 0.5-2).

    flock /tmp/bench.lock nice -n 10 python benchmarks/bench_method_costs.py [--threads 1] [--repeat 2]
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from rollout_core import explain, methods  # noqa: E402
from rollout_core.data.example_images import example_images  # noqa: E402
from rollout_core.data.sentiment import generate  # noqa: E402
from rollout_core.inputs.text import encode_text  # noqa: E402
from rollout_core.models.loading import load_model  # noqa: E402
from rollout_core.serving import budget  # noqa: E402

TEXT_SIZES = (16, 64, 256)


def _text_of(handle, tokens: int) -> str:
    """Generated reviews, cut to about `tokens` tokens of the model's tokenizer."""
    words = " ".join(e.text for e in generate(200, seed=1))
    ids = encode_text(handle.processor, words, tokens).input_ids
    return handle.processor.decode(ids, skip_special_tokens=True)


def _timed(fn, repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


def cases() -> list[tuple[str, object, object, object]]:
    """(label, handle, explain function, input) per model and size."""
    out = []
    text = load_model("default-text")
    for n in TEXT_SIZES:
        out.append((f"default-text {n} tok", text, explain.explain_text, _text_of(text, n)))
    image = next(iter(example_images().values()))
    for name in ("shapes-vit-tiny", "default-image", "dinov2-small"):
        out.append((name, load_model(name), explain.explain_image, image))
    return out


def corpus_rows(chosen: list[str], max_seconds: float, ratios: dict[str, list[float]]) -> None:
    """The Corpus page's estimate of a 100-row run beside the engine's measured time (one run after a warm batch)."""
    import pandas as pd

    from rollout_core.corpus.engine import explain_in_batches

    handle, rows = load_model("default-text"), generate(100, seed=0)
    frame = pd.DataFrame({"id": [str(i) for i in range(len(rows))], "text": [r.text for r in rows],
                          "label": [r.label for r in rows]})
    for spec in methods.runnable(handle):
        if spec.name not in chosen:
            continue
        estimate = sum(spec.seconds(w) for w in budget.corpus_batches(handle, list(frame["text"]), spec.name, 16))
        label = "default-text corpus, 100 rows in batches of 16"
        if estimate > max_seconds:
            print(f"| {label} | {spec.name} | | {estimate:.3g} s | not run (over {max_seconds:g} s) | |")
            continue
        explain_in_batches(handle, frame.head(16), spec.name, 16)
        measured = _timed(lambda m=spec.name: explain_in_batches(handle, frame, m, 16), 1)
        ratios.setdefault(spec.name, []).append(estimate / measured)
        print(f"| {label} | {spec.name} | 100 rows | {estimate:.3g} s | {measured:.3g} s | {estimate / measured:.2f} |",
              flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=1, help="torch threads (default 1: the shared machine)")
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--max-seconds", type=float, default=90.0)
    parser.add_argument("--methods", default="", help="comma-separated method ids (default: all)")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    chosen = [m for m in args.methods.split(",") if m] or list(methods.names())
    print(f"torch threads {args.threads}; load average {os.getloadavg()[0]:.2f} at start")
    print("| case | method | positions x layers | estimate | measured | estimate / measured |")
    print("|---|---|---|---|---|---|")
    ratios: dict[str, list[float]] = {}
    warm: set[tuple[str, str]] = set()
    for label, handle, run, source in cases():
        for spec in methods.runnable(handle):
            if spec.name not in chosen:
                continue
            work = budget.workload(handle, source, spec.name)
            estimate = spec.seconds(work)
            where = f"{work.tokens} x {work.layers}"
            if estimate > args.max_seconds:
                print(f"| {label} | {spec.name} | {where} | {estimate:.3g} s | not run (over {args.max_seconds:g} s) "
                      "| |")
                continue
            key = (handle.name, spec.name)
            if key not in warm:  # first call: numba kernels, hooks, the processor's first decode
                run(handle, source if handle.modality == "image" else "warm up", method=spec.name)
                warm.add(key)
            measured = _timed(lambda r=run, h=handle, s=source, m=spec.name: r(h, s, method=m),
                              args.repeat if estimate < 20 else 1)
            ratios.setdefault(spec.name, []).append(estimate / measured)
            print(f"| {label} | {spec.name} | {where} | {estimate:.3g} s | {measured:.3g} s | "
                  f"{estimate / measured:.2f} |", flush=True)
    corpus_rows(chosen, args.max_seconds, ratios)
    print()
    print("| method | cases | estimate / measured, min - max |")
    print("|---|---|---|")
    for name, values in ratios.items():
        print(f"| {name} | {len(values)} | {min(values):.2f} - {max(values):.2f} |")
    print(f"load average {os.getloadavg()[0]:.2f} at the end")


if __name__ == "__main__":
    main()
