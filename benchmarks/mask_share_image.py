"""Share of each method's map inside the shape mask, on generated shapes test images.

`python benchmarks/mask_share_image.py [N] [MODEL] [METHODS]` (defaults: 20, default-image,
rollout,gradient,attention; flow is slow on 257 tokens). For every image, the patch scores (negative
parts clipped) are weighted by the fraction of each patch's pixels inside the mask; the printout compares
that share with the mask's own area share (a map that ignores the shape scores about 1x).
"""
from __future__ import annotations

import sys
import time

import numpy as np
import torch
from PIL import Image

from rollout_core.data import shapes
from rollout_core.explain import explain_image


def main() -> None:
    torch.set_num_threads(1)
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 20
    model = sys.argv[2] if len(sys.argv) > 2 else "default-image"
    methods = (sys.argv[3] if len(sys.argv) > 3 else "rollout,gradient,attention").split(",")
    examples = shapes.generate(n, seed=7, split="test")
    shares: dict[str, list[float]] = {m: [] for m in methods}
    areas, correct, started = [], 0, time.perf_counter()
    for example in examples:
        for method in methods:
            explanation = explain_image(model, Image.fromarray(example.image), method=method)
            rows, cols = explanation.grid
            scores = np.asarray(explanation.scores)[explanation.patch_positions].reshape(rows, cols).clip(min=0)
            height, width = example.mask.shape
            inside = example.mask.reshape(rows, height // rows, cols, width // cols).mean(axis=(1, 3))
            shares[method].append(float((scores * inside).sum() / scores.sum()))
        areas.append(float(inside.mean()))
        correct += explanation.prediction[0].label == example.label
    area = np.array(areas)
    print(f"{model}: {n} images, {correct}/{n} predicted right, mask area share {area.mean():.3f}, "
          f"{time.perf_counter() - started:.0f} s")
    for method, values in shares.items():
        values = np.array(values)
        print(f"  {method:9s} share inside mask: mean {values.mean():.3f}, median {np.median(values):.3f}, "
              f"{np.mean(values / area):.2f}x the area share; > area share on {np.sum(values > area)}/{n}")


if __name__ == "__main__":
    main()
