"""ALTI's distance blocks, before and after a change to maths/contributions.py, side by side in one process.

Loads `_alti_layer` from git revision `--before` and from the working tree, swaps them into the ALTI method and
explains the same image with each, interleaved, `--rounds` times; prints the medians of process CPU time, their ratio
and the largest difference of the scores. Usage: python benchmarks/bench_alti_blocks.py --before REV [--threads 2]
"""
from __future__ import annotations

import argparse
import importlib.util
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

import rollout_core.maths.contributions as contributions
from rollout_core.data.example_images import example_images
from rollout_core.explain import explain_image
from rollout_core.models.loading import load_model

ROOT = Path(__file__).resolve().parents[1]


def _layer_at(rev: str):
    source = subprocess.run(["git", "show", f"{rev}:rollout_core/maths/contributions.py"], cwd=ROOT, check=True,
                            capture_output=True, text=True).stdout
    path = Path(tempfile.mkdtemp()) / "contributions_before.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location("contributions_before", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module._alti_layer


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--before", required=True, help="git revision of the old maths/contributions.py")
    parser.add_argument("--model", default="dinov2-small")
    parser.add_argument("--image", default="coffee")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    layers = {"before": _layer_at(args.before), "after": contributions._alti_layer}
    handle, image = load_model(args.model), example_images()[args.image]
    seconds: dict[str, list[float]] = {name: [] for name in layers}
    scores: dict[str, np.ndarray] = {}
    for _ in range(args.rounds):
        for name, layer in layers.items():
            contributions._alti_layer = layer
            start = time.process_time()
            scores[name] = explain_image(handle, image, method="alti").scores
            seconds[name].append(time.process_time() - start)
    before, after = (statistics.median(seconds[n]) for n in ("before", "after"))
    print(f"ALTI on {args.model} / {args.image}, {args.threads} threads, CPU s medians of {args.rounds}: "
          f"before {before:.2f}, after {after:.2f}, before/after {before / after:.1f}; "
          f"max |score difference| {float(np.abs(scores['before'] - scores['after']).max()):.1e}")


if __name__ == "__main__":
    main()
