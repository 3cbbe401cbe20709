"""What each corpus-engine change gives, interleaved in one process: rows per wall second and per CPU-second.

Cases: the one-by-one `explain_text` loop with 2 and 1 torch threads; batches in input order with 2 torch threads
(the engine before issue 14's throughput work) and with 1; batches sorted by token count with 1 torch thread; sorted
on 2 worker threads of 1 torch thread each (the engine now), in float32 and with the int8 model of
`--precision int8` (quantized once, before the cases). CPU-seconds count every thread, so the per-CPU-second
rate is the steady figure when other jobs share the cores; the median of the repeats is printed.

    python benchmarks/bench_corpus_ab.py [--rows 256] [--loop 40] [--repeats 2]
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Callable

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import rollout_core.corpus.engine as engine  # noqa: E402
from benchmarks.bench_corpus import corpus  # noqa: E402
from rollout_core import explain_text  # noqa: E402
from rollout_core.models.loading import load_model  # noqa: E402

BATCH, CHUNK = 64, 256


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rows", type=int, default=256)
    parser.add_argument("--loop", type=int, default=40)
    parser.add_argument("--repeats", type=int, default=2)
    args = parser.parse_args()
    model = load_model("default-text")
    rows = corpus(args.rows)
    explain_text(model, rows["text"][0], method="rollout")
    sorted_order = engine.length_order

    int8 = engine.at_precision(model, "int8")

    def batched(threads: int, workers: int, sort: bool, handle: object = model) -> None:
        torch.set_num_threads(threads)
        engine.length_order = sorted_order if sort else (lambda _model, part: np.arange(len(part)))
        for first in range(0, len(rows), CHUNK):
            engine.explain_in_batches(handle, rows.iloc[first:first + CHUNK], "rollout", BATCH, workers=workers)

    def loop(threads: int) -> None:
        torch.set_num_threads(threads)
        for text in rows["text"][:args.loop]:
            explain_text(model, text, method="rollout")

    cases: dict[str, tuple[Callable[[], None], int]] = {
        "loop, 2 torch threads": (lambda: loop(2), args.loop),
        "loop, 1 torch thread": (lambda: loop(1), args.loop),
        "batches in input order, 2 torch threads (before)": (lambda: batched(2, 1, False), args.rows),
        "batches in input order, 1 torch thread": (lambda: batched(1, 1, False), args.rows),
        "batches sorted by length, 1 torch thread": (lambda: batched(1, 1, True), args.rows),
        "sorted, 2 workers x 1 torch thread (now)": (lambda: batched(2, 2, True), args.rows),
        "sorted, 2 workers x 1 torch thread, int8": (lambda: batched(2, 2, True, int8), args.rows),
    }
    rates: dict[str, list[tuple[float, float]]] = {name: [] for name in cases}
    for _ in range(args.repeats):
        for name, (run, count) in cases.items():
            wall, cpu = time.perf_counter(), time.process_time()
            run()
            rates[name].append((count / (time.perf_counter() - wall), count / (time.process_time() - cpu)))
    print(f"default-text, rollout, {args.rows} generated sentences (loop: {args.loop}), batch {BATCH}, "
          f"median of {args.repeats}")
    print("| case | rows/s | rows per CPU-second |\n|---|---|---|")
    for name, values in rates.items():
        wall, cpu = np.median(np.array(values), axis=0)
        print(f"| {name} | {wall:.1f} | {cpu:.1f} |")


if __name__ == "__main__":
    main()
