"""What the dashboard pays per figure on a ViT-sized explanation (197 tokens, 12 layers, 12 heads).

Prints, side by side for every view: time to build the Plotly figure, time to serialise it (what
Streamlit sends), and the payload size; then the layer slider's views all at once (what the page sends)
against one view per move (what a server round trip per move would redraw). Synthetic numbers (no model needed); run:
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
        kind="image", method="rollout", model_name="synthetic",
        tokens=["[CLS]"] + [f"patch {r},{c}" for r in range(grid) for c in range(grid)],
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
        print(f"{name:28s} {1000 * statistics.median(build):9.1f} {1000 * statistics.median(dump):8.1f} "
              f"{len(payload) / 1e6:6.2f}")
    t0 = time.perf_counter()
    for _ in range(args.repeat):
        summarize(expl)
    print(f"{'summarize':28s} {1000 * (time.perf_counter() - t0) / args.repeat:9.1f}")
    slider_views(expl, args.repeat)


def slider_views(expl: Explanation, repeat: int) -> None:
    """Every slider position at once (what the page sends, layer_views.image_payload) against one position per move."""
    import json

    from rollout_core.figures import image as image_figures
    from rollout_core.figures import layer_views

    times, one = [], []
    for _ in range(repeat):
        image_figures._png_data_uri.cache_clear()  # a new image: its PNG is encoded once per payload
        t0 = time.perf_counter()
        payload = json.dumps(layer_views.image_payload(expl))
        times.append(time.perf_counter() - t0)
        image_figures._png_data_uri.cache_clear()
        t0 = time.perf_counter()
        for fig in (F.image_overlay(expl, layer=3), F.patch_heatmap(expl, layer=3)):
            fig.to_json()
        summarize(expl, layer=3)
        one.append(time.perf_counter() - t0)
    count = 2 * expl.num_layers
    print(f"{'all ' + str(count) + ' slider views, packed':28s} {1000 * statistics.median(times):9.1f} "
          f"{'':8s} {len(payload) / 1e6:6.2f}   (numbers per view, figures sent once)")
    print(f"{'one slider view (per move)':28s} {1000 * statistics.median(one):9.1f}")
    print(f"all views once = {statistics.median(times) / statistics.median(one):.1f} moves' worth of server work; "
          f"afterwards a move costs the server nothing")


if __name__ == "__main__":
    main()
