"""Corpus throughput and memory: the batched local engine vs a one-by-one loop, RSS at 1k and 10k rows, Ray vs local.

Side by side in one run on default-text with rollout (generated sentences):
- one-by-one: `explain_text` per sentence (what a notebook loop does) vs `run_corpus` with batches in float32 and
  with `precision="int8"` on the same rows, in rows per wall second and per CPU-second (all threads; steadier than
  wall time when other jobs share the cores); int8's fidelity against float32 on those rows: the largest
  difference of a word share, how often the top word and the prediction agree;
- memory: the engine's RSS after N1 and after N2 rows (it writes chunks and keeps nothing; float32);
- with --ray: Ray Data with 2 actors vs local on the same rows, and Ray's start-up (init + actor model loads).
The load average (1 minute) is printed at the start and after each part.

    python benchmarks/bench_corpus.py [--loop 200] [--batched 1024] [--rows 1000 10000] [--workers 2] [--ray]
"""
from __future__ import annotations

import argparse
import os
import resource
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from rollout_core import explain_text  # noqa: E402
from rollout_core.corpus.engine import read_results, run_corpus  # noqa: E402
from rollout_core.data.sentiment import generate  # noqa: E402
from rollout_core.models.loading import load_model  # noqa: E402


def corpus(n: int) -> pd.DataFrame:
    rows = generate(n, seed=7)
    return pd.DataFrame({"id": [str(i) for i in range(n)], "text": [r.text for r in rows],
                         "label": [r.label for r in rows]})


def rss_mib() -> float:
    """Current resident set size (Linux /proc), MiB."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def load() -> str:
    return f"load average {os.getloadavg()[0]:.2f}"


def timed_run(model: object, rows: pd.DataFrame, args: argparse.Namespace, precision: str
              ) -> tuple[float, float, pd.DataFrame]:
    """run_corpus on `rows`: wall seconds, CPU-seconds (all threads) and the rows it wrote (input order)."""
    with tempfile.TemporaryDirectory() as out:
        start, cpu = time.perf_counter(), time.process_time()
        run_corpus(model, rows, out, batch_size=args.batch_size, workers=args.workers, precision=precision,
                  progress=lambda done, total: None)
        wall, cpu = time.perf_counter() - start, time.process_time() - cpu
        return wall, cpu, read_results(out).set_index("id").loc[rows["id"]]


def fidelity(exact: pd.DataFrame, approx: pd.DataFrame) -> str:
    """int8 rows against float32 rows: share differences, top-word and prediction agreement."""
    diffs = [np.max(np.abs(np.asarray(a) - np.asarray(b))) for a, b in zip(exact["scores"], approx["scores"])]
    top1 = np.mean([a[0] == b[0] for a, b in zip(exact["top_words"], approx["top_words"])])
    agree = np.mean(exact["prediction"].to_numpy() == approx["prediction"].to_numpy())
    return (f"max |share difference| {max(diffs):.4f} (mean of the rows' max {np.mean(diffs):.4f}), "
            f"top-1 word agreement {top1:.1%}, prediction agreement {agree:.1%}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--model", default="default-text")
    parser.add_argument("--loop", type=int, default=200, help="rows for the one-by-one loop")
    parser.add_argument("--batched", type=int, default=1024, help="rows for run_corpus (float32 and int8)")
    parser.add_argument("--rows", type=int, nargs=2, default=(1000, 10000), help="RSS after this many rows")
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--workers", type=int, default=2, help="run_corpus's threads (one torch thread each)")
    parser.add_argument("--ray", action="store_true")
    args = parser.parse_args()
    print(f"start: {load()}")
    model = load_model(args.model)
    rows = corpus(max(args.loop, args.batched))
    explain_text(model, rows["text"][0], method="rollout")  # warm-up (the corpus run is rollout too)
    start, cpu = time.perf_counter(), time.process_time()
    for text in rows["text"][:args.loop]:
        explain_text(model, text, method="rollout")
    loop, loop_cpu = (time.perf_counter() - start) / args.loop, (time.process_time() - cpu) / args.loop
    print(f"loop done: {load()}")
    batched = rows.iloc[:args.batched]
    timed_run(model, batched.iloc[:args.batch_size], args, "float32")  # warm-up
    f32_wall, f32_cpu, exact = timed_run(model, batched, args, "float32")
    i8_wall, i8_cpu, approx = timed_run(model, batched, args, "int8")
    print(f"batched done: {load()}")
    print(f"\n{args.model}, rollout, generated sentences: loop {args.loop}, batched {args.batched} "
          f"(batch {args.batch_size}, {args.workers} workers)")
    print("| case | rows/s | ratio | rows per CPU-second |\n|---|---|---|---|")
    print(f"| one-by-one explain_text loop | {1 / loop:.1f} | 1.0x | {1 / loop_cpu:.1f} |")
    for name, wall, cpu in (("run_corpus, float32", f32_wall, f32_cpu), ("run_corpus, int8", i8_wall, i8_cpu)):
        print(f"| {name} | {args.batched / wall:.1f} | {args.batched / wall * loop:.1f}x | {args.batched / cpu:.1f} |")
    print(f"int8 vs float32 on the same {args.batched} rows: {fidelity(exact, approx)}")
    small, large = args.rows
    rows = corpus(large)
    with tempfile.TemporaryDirectory() as out:
        run_corpus(model, rows.iloc[:small], out, batch_size=args.batch_size, workers=args.workers,
                  progress=lambda done, total: None)
        at_small = rss_mib()
        start = time.perf_counter()
        run_corpus(model, rows, out, batch_size=args.batch_size, workers=args.workers,
                   progress=lambda done, total: None)
        rate = (large - small) / (time.perf_counter() - start)
        at_large = rss_mib()
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"\n| RSS after {small} rows | after {large} rows | change | peak | rows/s |\n|---|---|---|---|---|")
    print(f"| {at_small:.0f} MiB | {at_large:.0f} MiB | {at_large / at_small - 1:+.1%} | {peak:.0f} MiB | {rate:.1f} |")
    print(f"memory done: {load()}")
    if args.ray:
        at_local_rate = args.loop * f32_wall / args.batched  # float32's rate
        ray_vs_local(args.model, corpus(args.loop), at_local_rate, args.batch_size)


def ray_vs_local(model_name: str, rows: pd.DataFrame, local_seconds: float, batch_size: int) -> None:
    import ray

    start = time.perf_counter()
    ray.init(num_cpus=2, include_dashboard=False)
    init = time.perf_counter() - start
    with tempfile.TemporaryDirectory() as out:
        start = time.perf_counter()
        run_corpus(model_name, rows.iloc[:batch_size], Path(out) / "warm", batch_size=batch_size, workers=2,
                   engine="ray", progress=lambda done, total: None)
        first = time.perf_counter() - start
        start = time.perf_counter()
        run_corpus(model_name, rows, Path(out) / "all", batch_size=batch_size, workers=2, engine="ray",
                   progress=lambda done, total: None)
        whole = time.perf_counter() - start
    ray.shutdown()
    print(f"\n| Ray, 2 actors, {len(rows)} rows | seconds | vs local |\n|---|---|---|")
    print(f"| ray.init | {init:.1f} | |")
    print(f"| first job of one batch (actor start + model load) | {first:.1f} | |")
    print(f"| whole job | {whole:.1f} | {whole / local_seconds:.2f}x local's {local_seconds:.1f} s |")


if __name__ == "__main__":
    main()
