"""`corpus compare` at scale: peak memory and time of `compare_runs` at N1 and N2 rows, against the whole-frame
approach (both runs read whole with `read_results`, joined in pandas), side by side in one run.

The runs are written here as the engine writes them (its SCHEMA, 256-row chunks, a manifest): the generated
sentences, their words and spans (`compare.words`), and shares drawn at random (B: A's shares perturbed), so that
100k rows take seconds to make instead of the half hour of explaining them. `compare_runs` reads only what is stored,
so it does the same work as on explained rows. Each measurement runs in a fresh process (peak RSS = VmHWM), with
B stored in the same order as A (aligned slices) and in reverse order (hash buckets through a scratch folder).

    python benchmarks/bench_corpus_compare.py [--rows 10000 100000] [--replicates 1000]
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow as pa

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from rollout_core.compare import words  # noqa: E402
from rollout_core.corpus.engine import SCHEMA, SCHEMA_VERSION  # noqa: E402
from rollout_core.corpus.folder import open_for_writing  # noqa: E402
from rollout_core.data.sentiment import generate  # noqa: E402

CHUNK = 256


def write_runs(n: int, folder: Path) -> tuple[Path, Path, Path]:
    """Runs A, B (same order) and B reversed over `n` generated sentences."""
    rng = np.random.default_rng(0)
    texts = [e.text for e in generate(n, seed=11)]
    spans = [words(t) for t in texts]
    labels = ["POSITIVE" if i % 2 else "NEGATIVE" for i in range(n)]
    shares_a = [rng.dirichlet(np.ones(len(s))) for s in spans]
    shares_b = [a * rng.lognormal(0, 0.3, len(a)) for a in shares_a]
    shares_b = [b / b.sum() for b in shares_b]
    preds_b = [lab if rng.random() < 0.9 else ("NEGATIVE" if lab == "POSITIVE" else "POSITIVE") for lab in labels]
    out = []
    for name, shares, preds, order in (("a", shares_a, labels, range(n)), ("b", shares_b, preds_b, range(n)),
                                       ("b_reversed", shares_b, preds_b, range(n - 1, -1, -1))):
        run = folder / name
        facts = {"model": f"synthetic-{name}", "method": "rollout", "top_k": 5, "schema": SCHEMA_VERSION}
        order = list(order)
        with open_for_writing(run, facts) as stored:
            for first in range(0, n, CHUNK):
                rows = order[first:first + CHUNK]
                top = [np.argsort(-shares[i])[:5] for i in rows]
                table = pa.Table.from_pydict({
                    "id": [f"row-{i}" for i in rows], "kind": ["text"] * len(rows), "text": [texts[i] for i in rows],
                    "label": [labels[i] for i in rows], "prediction": [preds[i] for i in rows],
                    "probability": [0.9] * len(rows),
                    "top_words": [[spans[i][j][0] for j in t] for i, t in zip(rows, top)],
                    "top_shares": [[float(shares[i][j]) for j in t] for i, t in zip(rows, top)],
                    "words": [[w for w, _, _ in spans[i]] for i in rows],
                    "starts": [[s for _, s, _ in spans[i]] for i in rows],
                    "ends": [[e for _, _, e in spans[i]] for i in rows], "scores": [shares[i].tolist() for i in rows]},
                    schema=SCHEMA)
                stored.write_chunk(table)
        out.append(run)
    return tuple(out)


_CHILD = r'''
import json, sys, time
from pathlib import Path
sys.path.insert(0, sys.argv[1])
how, a, b, replicates = sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5])
import pandas as pd
from rollout_core.corpus.compare_runs import compare_runs
from rollout_core.corpus.engine import read_results
def hwm():
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
base = hwm()
start, cpu = time.perf_counter(), time.process_time()
if how == "stream":
    result = compare_runs(a, b, replicates=replicates)
    rows, median = result.summary["rows"], result.summary["spearman_median"]
else:  # the whole-frame approach: both runs in memory, joined, exploded to one row per word
    fa, fb = read_results(a), read_results(b)
    joined = fa.merge(fb, on="id", suffixes=("_a", "_b"))
    words = joined[["id", "prediction_a", "words_a", "scores_a", "scores_b"]].explode(
        ["words_a", "scores_a", "scores_b"])
    means = words.groupby(["prediction_a", "words_a"])[["scores_a", "scores_b"]].mean()
    rows, median = len(joined), float("nan")
print(json.dumps({"rows": rows, "seconds": time.perf_counter() - start, "cpu": time.process_time() - cpu,
                  "peak_mib": hwm(), "import_mib": base, "median": median}))
'''


def measure(how: str, a: Path, b: Path, replicates: int) -> dict:
    env = dict(os.environ, OMP_NUM_THREADS="1")
    out = subprocess.run([sys.executable, "-c", _CHILD, str(ROOT), how, str(a), str(b), str(replicates)],
                         capture_output=True, text=True, env=env, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, nargs=2, default=[10_000, 100_000])
    parser.add_argument("--replicates", type=int, default=1000)
    args = parser.parse_args()
    print(f"load average {os.getloadavg()[0]:.2f} at the start")
    results: dict[tuple[str, int], dict] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for n in args.rows:
            start = time.perf_counter()
            a, b, b_reversed = write_runs(n, Path(tmp) / str(n))
            print(f"{n} rows: runs written in {time.perf_counter() - start:.1f} s")
            for how, other in (("stream", b), ("stream", b_reversed), ("whole", b)):
                label = how if other == b else "stream, B in reverse order"
                r = results[(label, n)] = measure(how, a, other, args.replicates)
                print(f"  {label:28s} {r['seconds']:6.1f} s ({r['cpu']:.1f} CPU-s, {r['rows'] / r['seconds']:,.0f} "
                      f"rows/s)  peak RSS {r['peak_mib']:7.1f} MiB (after imports {r['import_mib']:.1f})  "
                      f"load {os.getloadavg()[0]:.2f}")
    n1, n2 = args.rows
    for label in ("stream", "stream, B in reverse order", "whole"):
        r1, r2 = results[(label, n1)], results[(label, n2)]
        grow = (r2["peak_mib"] - r2["import_mib"]) - (r1["peak_mib"] - r1["import_mib"])
        print(f"{label:28s} peak RSS {r1['peak_mib']:.0f} -> {r2['peak_mib']:.0f} MiB "
              f"({r2['peak_mib'] / r1['peak_mib']:.2f}x; +{grow:.0f} MiB above the imports for {n2 - n1:,} more rows), "
              f"time {r2['seconds'] / r1['seconds']:.1f}x")
    print(f"load average {os.getloadavg()[0]:.2f} at the end")


if __name__ == "__main__":
    main()
