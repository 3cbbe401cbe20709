"""Flow row (one explained output, n max-flows) in units of rollouts of the same 128-token, 6-layer attentions,
beside the graph main used before (all L·n² edges) and scipy's two solvers; mass-pruned flow
(maths.flow_bounded) vs exact on diffuse 197-token, 12-layer attention: time, measured error, reported bound.
The same on the image page's real case (default-image, pooled readout). All in one run, 1 torch thread.

    python benchmarks/bench_flow_row.py
"""
from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import numpy as np
import torch
from scipy.sparse import csr_matrix
from scipy.sparse.csgraph import maximum_flow

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from rollout_core.maths.flow import SCALE, _prepare, attention_flow, row_graph  # noqa: E402
from rollout_core.maths.flow_bounded import DEFAULT_EPS, bounded_attention_flow, flow_cost_estimate  # noqa: E402
from rollout_core.maths.rollout import attention_rollout  # noqa: E402


def timed(fn):
    start = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - start


def previous_graph(layers: list[np.ndarray], output: int) -> csr_matrix:
    """The graph main built before: every (layer, token) node, every edge, top layer into the output only."""
    n, rows, cols, data = layers[0].shape[0], [], [], []
    for depth, aug in enumerate(layers):
        if depth == len(layers) - 1:
            aug = np.where(np.arange(n)[:, None] == output, aug, 0.0)
        to, src = np.nonzero(np.rint(aug * SCALE) > 0)
        rows.append(depth * n + src)
        cols.append((depth + 1) * n + to)
        data.append(np.rint(aug[to, src] * SCALE))
    size = n * (len(layers) + 1)
    return csr_matrix((np.concatenate(data).astype(np.int32), (np.concatenate(rows), np.concatenate(cols))),
                      shape=(size, size))


def solve_all(graph: csr_matrix, sources, sink: int, method: str = "dinic") -> float:
    return sum(maximum_flow(graph, s, sink, method=method).flow_value for s in sources) / SCALE


def main() -> None:
    torch.set_num_threads(1)
    print(f"load average {os.getloadavg()[0]:.2f}, 1 torch thread")
    g = torch.Generator().manual_seed(0)
    text = list(torch.softmax(torch.randn(6, 1, 12, 128, 128, generator=g) * 3, -1))
    _, t_roll = timed(lambda: [attention_rollout(text) for _ in range(20)])
    t_roll /= 20
    _, t_row = timed(lambda: attention_flow(text, output_tokens=[0]))
    _, t_prefixes = timed(lambda: [attention_flow(text, output_tokens=[0], end_layer=k) for k in range(1, 7)])
    layers = [a[0] for a in _prepare(text, "mean", 1.0, None, 0, None).augmented]
    old = previous_graph(layers, 0)
    _, t_old = timed(lambda: solve_all(old, range(128), 6 * 128))
    new = row_graph(layers, 0, None)
    _, t_dinic = timed(lambda: [maximum_flow(new.for_source(j), 0, new.sink) for j in range(8)])
    _, t_ek = timed(lambda: [maximum_flow(new.for_source(j), 0, new.sink, method="edmonds_karp") for j in range(8)])
    estimate = flow_cost_estimate(128, 6, 1)["seconds"]
    print("| case | ours | reference | ratio |")
    print("|---|---|---|---|")
    print(f"| flow row, 128 tokens x 6 layers ({new.matrix.nnz} edges) | {t_row:.2f} s | rollout {t_roll * 1e3:.1f} ms "
          f"| {t_row / t_roll:.0f} rollouts (target <= 100) |")
    print(f"| same row on the previous graph ({old.nnz} edges) | {t_old:.2f} s | this graph {t_row:.2f} s "
          f"| {t_old / t_row:.2f}x slower |")
    print(f"| the method's slider rows (6 layer prefixes) | {t_prefixes:.2f} s | rollout {t_roll * 1e3:.1f} ms "
          f"| {t_prefixes / t_roll:.0f} rollouts |")
    print(f"| scipy edmonds_karp vs dinic, 8 sources of that row | {t_ek:.2f} s | dinic {t_dinic:.3f} s "
          f"| {t_ek / t_dinic:.0f}x slower |")
    print(f"| flow_cost_estimate(128, 6, 1) | {estimate:.2f} s | measured {t_row:.2f} s | {estimate / t_row:.2f} |")
    diffuse = list(torch.softmax(torch.randn(12, 1, 3, 197, 197, generator=g, dtype=torch.float64) * 0.1, -1))
    exact, t_exact = timed(lambda: attention_flow(diffuse, output_tokens=[0]))
    for eps in (DEFAULT_EPS, 0.4, 0.49):
        approx, t_approx = timed(lambda: bounded_attention_flow(diffuse, eps=eps, output_tokens=[0]))
        error = float((approx.values - exact).abs().max())
        print(f"| mass-pruned flow eps {eps}, diffuse 197 tokens x 12 layers, CLS row | {t_approx:.2f} s, "
              f"error {error:.1e}, bound {approx.error_bound:.1e} | exact {t_exact:.2f} s "
              f"| {t_exact / t_approx:.1f}x faster (target 5x; error target 1e-2) |")
    default_image_rows()



def default_image_rows() -> None:
    """The image page's case: default-image (DINOv2, [CLS] + patch-mean readout), final pooled row."""
    from rollout_core import capture
    from rollout_core.data.example_images import example_images
    from rollout_core.inputs.images import load_image
    from rollout_core.maths.flow import pooled_attention_flow
    from rollout_core.models import families
    from rollout_core.models.loading import load_model

    handle = load_model("default-image")
    pixels = handle.processor(images=load_image(example_images()["chelsea"]), return_tensors="pt")["pixel_values"]
    layout = families.image_layout(handle.config, pixels.shape[-2], pixels.shape[-1])
    captured = capture.run(handle.model, {"pixel_values": pixels}, num_layers=handle.num_layers)
    atts = [a.double() for a in captured.attentions]
    pooling = families.head_pooling(families.spec_for(handle.config), handle.config, handle.model, handle.task)
    weights = families.row_weights(pooling, torch.ones(1, layout.num_tokens, dtype=torch.bool), layout.patch_positions)
    exact, t_exact = timed(lambda: pooled_attention_flow(atts, weights))
    for eps in (DEFAULT_EPS, 0.3):
        approx, t_approx = timed(lambda: bounded_attention_flow(atts, eps=eps, weights=weights))
        error = float((approx.values[:, 0] - exact).abs().max())
        print(f"| mass-pruned flow eps {eps}, default-image ({layout.num_tokens} tokens x {len(atts)} layers), "
              "pooled row "
              f"| {t_approx:.2f} s, error {error:.1e}, bound {approx.error_bound:.1e} | exact {t_exact:.2f} s "
              f"| {t_exact / t_approx:.1f}x faster |")


if __name__ == "__main__":
    main()
