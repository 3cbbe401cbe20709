"""What the dashboard pays per figure on a ViT-sized explanation (197 tokens, 12 layers, 12 heads).

Prints, side by side for every view: time to build the Plotly figure, time to serialise it (what
Streamlit sends), and the payload size. Synthetic numbers (no model needed); run:
    OMP_NUM_THREADS=1 python benchmarks/bench_figures.py [--repeat 5]
"""
from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

from rollout_core import figures as F
from rollout_core.explanation import Explanation
from rollout_core.summary import summarize


def vit_like(seed: int = 0, grid: int = 14, layers: int = 12, heads: int = 12) -> Explanation:
    rng = np.random.default_rng(seed)
    n = grid * grid + 1
    attn = rng.random((layers, n, n)).astype(np.float32)
    attn /= attn.sum(-1, keepdims=True)
    scores = rng.random(n)
    scores /= scores.sum()
    return Explanation(
        kind="image", method="rollout", model_name="synthetic", tokens=["[CLS]"] + [f"patch {r},{c}" for r in range(grid) for c in range(grid)],
        special=np.array([True] + [False] * (n - 1)), scores=scores, layer_scores=np.tile(scores, (layers, 1)),
        layer_attention_scores=np.tile(scores, (layers, 1)), matrix=attn[-1], layer_attention=attn,
        settings={"head_fusion": "mean", "model_heads": heads}, target_description="row of [CLS]", grid=(grid, grid),
        patch_positions=np.arange(1, n), image=rng.integers(0, 255, (224, 224, 3), dtype=np.uint8),
        head_attention=rng.random((layers, heads, n, n)).astype(np.float32),
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    expl = vit_like()
    views = {
        "image_overlay(layer=3)": lambda: F.image_overlay(expl, layer=3),
        "patch_heatmap": lambda: F.patch_heatmap(expl),
        "score_bar": lambda: F.score_bar(expl),
        "matrix_heatmap (197x197)": lambda: F.matrix_heatmap(expl),
        "head_grid (12 heads)": lambda: F.head_grid(expl, 3),
    }
    F.image_overlay(expl)  # first figure pays Plotly's one-off validator imports
    print(f"{'view':28s} {'build ms':>9s} {'json ms':>8s} {'MB':>6s}   (median of {args.repeat})")
    for name, make in views.items():
        build, dump = [], []
        for _ in range(args.repeat):
            t0 = time.perf_counter()
            fig = make()
            t1 = time.perf_counter()
            payload = fig.to_json()
            t2 = time.perf_counter()
            build.append(t1 - t0)
            dump.append(t2 - t1)
        print(f"{name:28s} {1000 * statistics.median(build):9.1f} {1000 * statistics.median(dump):8.1f} {len(payload) / 1e6:6.2f}")
    t0 = time.perf_counter()
    for _ in range(args.repeat):
        summarize(expl)
    print(f"{'summarize':28s} {1000 * (time.perf_counter() - t0) / args.repeat:9.1f}")


if __name__ == "__main__":
    main()
