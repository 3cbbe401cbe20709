"""A fresh process's first attention flow against its second (issue 29: within 0.3 s).

Each case runs in a fresh subprocess, one torch thread: load default-text, then explain two different sentences
with method="flow", timing each. Cases:
- `no warm-up`: what a process paid before the warm-up existed (numba's on-disk cache filled);
- `warm-up at start`: as the app and the warm server do, `serving.kernels.start_flow_kernels()` is called when the
  process starts and the model loads meanwhile; the flow runs once it has finished (its time is printed);
- `empty numba cache`: no warm-up and NUMBA_CACHE_DIR pointing at an empty folder: what `python -m rollout_core setup`
  (rollout_core.build.kernels) saves every process from.

Run: flock /tmp/bench.lock python benchmarks/bench_flow_first.py [--runs 3]
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SENTENCES = ("the film was good but the plot was slow and the ending was rushed",
             "a boring story with great music and some fine acting from the cast")


def _child(warm: bool) -> None:
    start = time.perf_counter()
    import torch

    torch.set_num_threads(1)
    from rollout_core.serving import kernels

    thread = kernels.start_flow_kernels() if warm else None
    import rollout_core

    handle = rollout_core.load_model("default-text")
    loaded = time.perf_counter() - start
    waited = time.perf_counter()
    if thread is not None:
        thread.join()
    waited = time.perf_counter() - waited
    seconds = []
    for sentence in SENTENCES:
        begin = time.perf_counter()
        rollout_core.explain_text(handle, sentence, method="flow")
        seconds.append(time.perf_counter() - begin)
    print(json.dumps({"first": seconds[0], "second": seconds[1], "loaded": loaded, "waited": waited}))


def _run(warm: bool, env: dict[str, str]) -> dict[str, float]:
    out = subprocess.run([sys.executable, __file__, "--child", "warm" if warm else "cold"], capture_output=True,
                         text=True, env=env, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3, help="fresh processes per case (medians shown)")
    parser.add_argument("--child", choices=("warm", "cold"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        _child(args.child == "warm")
        return
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONPATH": os.environ.get("PYTHONPATH", str(ROOT))}
    print(f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; torch threads 1; load average "
          f"{' '.join(Path('/proc/loadavg').read_text().split()[:3])}; default-text, two sentences, method='flow'; "
          f"median of {args.runs} fresh processes")
    with tempfile.TemporaryDirectory() as empty:
        cases = (("no warm-up", False, env), ("warm-up at start", True, env),
                 ("empty numba cache", False, {**env, "NUMBA_CACHE_DIR": empty}))
        print(f"{'case':<20} {'first flow':>10} {'second':>8} {'first - second':>14} {'model load':>10} "
              f"{'waited for warm-up':>18}")
        for label, warm, case_env in cases:
            rows = []
            for _ in range(args.runs):
                if case_env is not env:  # a fresh empty cache each time
                    with tempfile.TemporaryDirectory() as fresh:
                        rows.append(_run(warm, {**case_env, "NUMBA_CACHE_DIR": fresh}))
                else:
                    rows.append(_run(warm, case_env))
            med = {k: statistics.median(r[k] for r in rows) for k in rows[0]}
            gap = statistics.median(r["first"] - r["second"] for r in rows)
            print(f"{label:<20} {med['first']:9.3f}s {med['second']:7.3f}s {gap:13.3f}s {med['loaded']:9.1f}s "
                  f"{med['waited']:17.2f}s")
    print("load average at the end: " + " ".join(Path("/proc/loadavg").read_text().split()[:3]))


if __name__ == "__main__":
    main()
