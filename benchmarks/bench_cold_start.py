"""CLI cold start: wall time to the first line of `python -m rollout_core text "The food was cold." --model
default-text`, for this tree in a fresh process, for this tree with a warm server running (`serve`, started
once before the runs), and (with --old DIR, e.g. a `git archive` of the previous main) an older tree, run
alternately in one session, next to the floor set by the libraries alone (import torch; import transformers'
BERT classes, load the same folder, one forward pass with attentions, print).

    python benchmarks/bench_cold_start.py [--old DIR] [--runs 3]
"""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
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


def first_output(args: list[str], cwd: Path, server_dir: str | None = None) -> float:
    """Seconds from the start of a fresh interpreter to its first byte on stdout (the run must succeed)."""
    env = dict(os.environ, PYTHONPATH=str(cwd), ROLLOUT_SERVER="on" if server_dir else "off",
               ROLLOUT_SERVER_DIR=server_dir or "")
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
    server_dir = tempfile.mkdtemp(prefix="bench-serve-")  # mode 700, as the server requires
    env = dict(os.environ, PYTHONPATH=str(ROOT), ROLLOUT_SERVER="on", ROLLOUT_SERVER_DIR=server_dir)
    subprocess.run([sys.executable, "-m", "rollout_core", "serve", "--detach", "--idle-minutes", "30"], cwd=ROOT,
                   env=env, check=True, stdout=subprocess.DEVNULL)
    cases = {"import torch": (["-c", "import torch; print(1)"], ROOT, None),
             "libraries' floor": (["-c", FLOOR], ROOT, None), "this tree": (CLI, ROOT, None),
             "this tree, warm server": (CLI, ROOT, server_dir)}
    if args.old is not None:
        cases["old tree"] = (CLI, args.old.resolve(), None)
    times: dict[str, list[float]] = {name: [] for name in cases}
    try:
        for _ in range(args.runs):  # alternate, so a change in the machine's load hits every case alike
            for name, (argv, cwd, served_by) in cases.items():
                times[name].append(first_output(argv, cwd, served_by))
    finally:
        subprocess.run([sys.executable, "-m", "rollout_core", "serve", "--stop"], cwd=ROOT, env=env,
                       stdout=subprocess.DEVNULL)
    print(f"load average {os.getloadavg()[0]:.2f}; time to first output, median of {args.runs} (min-max)")
    for name, values in times.items():
        print(f"{name:<24} {statistics.median(values):6.2f} s  ({min(values):.2f}-{max(values):.2f})")
    median = {name: statistics.median(values) for name, values in times.items()}
    print(f"warm server / this tree in a fresh process: {median['this tree, warm server'] / median['this tree']:.3f}"
          " (target <= 0.33)")
    if args.old is not None:
        print(f"this tree / old tree: {median['this tree'] / median['old tree']:.2f}; warm server / old tree: "
              f"{median['this tree, warm server'] / median['old tree']:.3f}")
    floor = median["libraries' floor"] / median["this tree"]
    print(f"libraries' floor / this tree: {floor:.2f}")


if __name__ == "__main__":
    main()
