"""Corpus throughput and memory: the batched local engine vs a one-by-one loop, RSS at 1k and 10k rows, Ray vs local.

Side by side in one run on default-text with rollout (generated sentences):
- one-by-one: `explain_text` per sentence (what a notebook loop does) vs `run_local` with batches, in rows per
  wall second and per CPU-second (all threads; steadier than wall time when other jobs share the cores);
- memory: the engine's peak RSS after N1 and after N2 rows (it writes chunks and keeps nothing);
- with --ray: Ray Data with 2 actors vs local on the same rows, and Ray's start-up (init + actor model loads).

    python benchmarks/bench_corpus.py [--loop 200] [--rows 1000 10000] [--workers 2] [--ray]
"""
from __future__ import annotations

import argparse
import resource
import sys
import tempfile
import time
from pathlib import Path

import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from rollout_core import explain_text  # noqa: E402
from rollout_core.corpus.engine import run_local  # noqa: E402
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--model", default="default-text")
    parser.add_argument("--loop", type=int, default=200, help="rows for the one-by-one vs batched comparison")
    parser.add_argument("--rows", type=int, nargs=2, default=(1000, 10000), help="RSS after this many rows")
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--workers", type=int, default=2, help="run_local's threads (one torch thread each)")
    parser.add_argument("--ray", action="store_true")
    args = parser.parse_args()
    model = load_model(args.model)
    quiet = lambda done, total: None  # noqa: E731
    texts = corpus(args.loop)
    explain_text(model, texts["text"][0], method="rollout")  # warm-up (the corpus run is rollout too)
    start, cpu = time.perf_counter(), time.process_time()
    for text in texts["text"]:
        explain_text(model, text, method="rollout")
    loop, loop_cpu = time.perf_counter() - start, time.process_time() - cpu
    with tempfile.TemporaryDirectory() as out:
        start, cpu = time.perf_counter(), time.process_time()
        run_local(model, texts, out, batch_size=args.batch_size, workers=args.workers, progress=quiet)
        batched, batched_cpu = time.perf_counter() - start, time.process_time() - cpu
    print(f"{args.model}, rollout, {args.loop} generated sentences, batch {args.batch_size}, {args.workers} workers")
    print("| case | rows/s | ratio | rows per CPU-second |\n|---|---|---|---|")
    print(f"| one-by-one explain_text loop | {args.loop / loop:.1f} | 1.0x | {args.loop / loop_cpu:.1f} |")
    print(f"| run_local, batched | {args.loop / batched:.1f} | {loop / batched:.1f}x | {args.loop / batched_cpu:.1f} |")
    small, large = args.rows
    rows = corpus(large)
    with tempfile.TemporaryDirectory() as out:
        run_local(model, rows.iloc[:small], out, batch_size=args.batch_size, workers=args.workers, progress=quiet)
        at_small = rss_mib()
        start = time.perf_counter()
        run_local(model, rows, out, batch_size=args.batch_size, workers=args.workers, progress=quiet)
        rate = (large - small) / (time.perf_counter() - start)
        at_large = rss_mib()
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"\n| RSS after {small} rows | after {large} rows | change | peak | rows/s |\n|---|---|---|---|---|")
    print(f"| {at_small:.0f} MiB | {at_large:.0f} MiB | {at_large / at_small - 1:+.1%} | {peak:.0f} MiB | {rate:.1f} |")
    if args.ray:
        ray_vs_local(args.model, corpus(args.loop), batched, args.batch_size)


def ray_vs_local(model_name: str, rows: pd.DataFrame, local_seconds: float, batch_size: int) -> None:
    import ray

    from rollout_core.corpus.ray_engine import run_ray

    start = time.perf_counter()
    ray.init(num_cpus=2, include_dashboard=False)
    init = time.perf_counter() - start
    with tempfile.TemporaryDirectory() as out:
        start = time.perf_counter()
        run_ray(model_name, rows.iloc[:batch_size], Path(out) / "warm", batch_size=batch_size, workers=2)
        first = time.perf_counter() - start
        start = time.perf_counter()
        run_ray(model_name, rows, Path(out) / "all", batch_size=batch_size, workers=2)
        whole = time.perf_counter() - start
    ray.shutdown()
    print(f"\n| Ray, 2 actors, {len(rows)} rows | seconds | vs local |\n|---|---|---|")
    print(f"| ray.init | {init:.1f} | |")
    print(f"| first job of one batch (actor start + model load) | {first:.1f} | |")
    print(f"| whole job | {whole:.1f} | {whole / local_seconds:.2f}x local's {local_seconds:.1f} s |")


if __name__ == "__main__":
    main()
