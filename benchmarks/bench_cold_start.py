"""CLI cold start: wall time to the first line of `python -m rollout_core text "The food was cold." --model
default-text`, for this tree and (with --old DIR, e.g. a `git archive` of the previous main) an older one,
run alternately in one session, next to the floor set by the libraries alone (import torch; import
transformers' BERT classes, load the same folder, one forward pass with attentions, print).

    python benchmarks/bench_cold_start.py [--old DIR] [--runs 3]
"""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CLI = ["-m", "rollout_core", "text", "The food was cold.", "--model", "default-text"]
FLOOR = """
import torch, transformers
from rollout_core.paths import models_dir
folder = str(models_dir() / "default-text")
tok = transformers.AutoTokenizer.from_pretrained(folder)
model = transformers.AutoModelForSequenceClassification.from_pretrained(folder, attn_implementation="eager")
with torch.no_grad():
    out = model(**tok("The food was cold.", return_tensors="pt"), output_attentions=True)
print(out.logits.argmax(-1).item())
"""


def first_output(args: list[str], cwd: Path) -> float:
    """Seconds from the start of a fresh interpreter to its first byte on stdout (the run must succeed)."""
    env = dict(os.environ, PYTHONPATH=str(cwd))
    start = time.perf_counter()
    proc = subprocess.Popen([sys.executable, *args], cwd=cwd, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL)
    assert proc.stdout is not None
    proc.stdout.read(1)
    elapsed = time.perf_counter() - start
    proc.stdout.read()
    if proc.wait() != 0:
        raise SystemExit(f"{' '.join(args)} failed in {cwd}")
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--old", type=Path, help="another checkout to measure side by side")
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    cases = {"import torch": (["-c", "import torch; print(1)"], ROOT),
             "libraries' floor": (["-c", FLOOR], ROOT), "this tree": (CLI, ROOT)}
    if args.old is not None:
        cases["old tree"] = (CLI, args.old.resolve())
    times: dict[str, list[float]] = {name: [] for name in cases}
    for _ in range(args.runs):  # alternate, so a change in the machine's load hits every case alike
        for name, (argv, cwd) in cases.items():
            times[name].append(first_output(argv, cwd))
    print(f"load average {os.getloadavg()[0]:.2f}; time to first output, median of {args.runs} (min-max)")
    for name, values in times.items():
        print(f"{name:<18} {statistics.median(values):6.2f} s  ({min(values):.2f}-{max(values):.2f})")
    if args.old is not None:
        ratio = statistics.median(times["this tree"]) / statistics.median(times["old tree"])
        print(f"this tree / old tree: {ratio:.2f} (target <= 0.33)")
    floor = statistics.median(times["libraries' floor"]) / statistics.median(times["this tree"])
    print(f"libraries' floor / this tree: {floor:.2f}")


if __name__ == "__main__":
    main()
