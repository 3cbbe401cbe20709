"""Approximate attention flow with a sound, per-result error bound, and an up-front cost estimate.

Pruning by mass: each row of every Ã keeps the smallest set of its largest edges holding at least a share
(1 - eps) of the row's mass; the rest is dropped. Max flow is then solved on the pruned graph G'.

Bound (a posteriori, sound): let f' be the pruned max flow and (S, T) the min cut it leaves (S = nodes
reachable from the source in the residual graph of G'). In the full graph G the same cut has capacity
f' + d, d = the capacity of the pruned edges from S to T, and every cut bounds the max flow, so
f' <= f <= f' + d. Per output row with raw values v'_j, bounds d_j, S' = sum v'_j, D = sum d_j, the
normalised values v_j / S lie in [v'_j / (S' + D), (v'_j + d_j) / S'], so
|v_j/S - v'_j/S'| <= max(d_j / S', v'_j * D / (S' (S' + D))). That maximum over the row is the reported bound
(up to the 2^-30 integer rounding of maths.flow).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np
import torch
from scipy.sparse.csgraph import breadth_first_order, maximum_flow

from rollout_core.errors import InputError
from rollout_core.maths.flow import SCALE, ProgressCallback, _flow_graph, _prepare
from rollout_core.maths.rollout import Attentions

# Seconds per max-flow problem per graph edge, measured on this machine's 2 shared cores (bench_flow.py).
SECONDS_PER_EDGE = 2.0e-8


@dataclass
class FlowResult:
    """Flow rows (B, k, n) and the bound on their absolute error (0.0 for exact flow)."""

    values: torch.Tensor
    error_bound: float


def flow_cost_estimate(n: int, layers: int, rows: int) -> dict[str, float]:
    """Cost of exact flow for `rows` output rows of an n-token input through `layers` layers.

    Returns the number of max-flow problems (rows * n) and an estimate of the seconds they take
    (each problem walks a graph of about layers * n^2 edges).
    """
    if n < 1 or layers < 1 or rows < 0:
        raise InputError(f"flow_cost_estimate needs n, layers >= 1 and rows >= 0, got {n}, {layers}, {rows}")
    problems = rows * n
    return {"max_flows": float(problems), "seconds": problems * layers * n * n * SECONDS_PER_EDGE}


def prune_by_mass(augmented: np.ndarray, eps: float) -> np.ndarray:
    """Each row (last axis) keeps its largest entries up to a share >= 1 - eps of its sum; others set to 0."""
    if not 0.0 <= eps < 1.0:
        raise InputError(f"the pruned mass share eps must be in [0, 1), got {eps}")
    ordered = -np.sort(-augmented, axis=-1)
    cumulative = np.cumsum(ordered, axis=-1)
    need = (1.0 - eps) * cumulative[..., -1:]
    count = np.minimum((cumulative < need).sum(axis=-1, keepdims=True), augmented.shape[-1] - 1)
    cutoff = np.take_along_axis(ordered, count, axis=-1)
    return np.where(augmented >= cutoff, augmented, 0.0)


def _bounded_rows(full: Sequence[np.ndarray], pruned: Sequence[np.ndarray], outputs: Sequence[int],
                  progress: ProgressCallback | None, done: int, total: int) -> tuple[np.ndarray, float, int]:
    n = full[0].shape[0]
    graph = _flow_graph(pruned, outputs, 0.0)
    removed = (_flow_graph(full, outputs, 0.0) - graph).tocoo()
    lost = removed.data > 0
    r_from, r_to, r_cap = removed.row[lost], removed.col[lost], removed.data[lost].astype(np.float64)
    both = (graph + graph.T * 0).tocsr()  # the residual graph's structure: every edge and its reverse
    both.sort_indices()
    top = n * len(full)
    values = np.zeros((len(outputs), n))
    slack = np.zeros((len(outputs), n))
    for row, output in enumerate(outputs):
        for source in range(n):
            result = maximum_flow(graph, source, top + output, method="dinic")
            values[row, source] = result.flow_value / SCALE
            flow = result.flow.tocsr()
            flow.sort_indices()
            residual = (both - flow).tocsr()
            residual.data = (residual.data > 0).astype(np.int8)
            residual.eliminate_zeros()
            reach = np.zeros(graph.shape[0], dtype=bool)
            reach[breadth_first_order(residual, source, directed=True, return_predecessors=False)] = True
            slack[row, source] = r_cap[reach[r_from] & ~reach[r_to]].sum() / SCALE
            done += 1
            if progress is not None:
                progress(done, total)
    sums = values.sum(axis=1, keepdims=True)
    safe = np.where(sums > 0, sums, 1.0)
    spread = slack.sum(axis=1, keepdims=True)
    bound = np.maximum(slack / safe, values * spread / (safe * (safe + spread)))
    bound = float(bound.max()) if (sums > 0).all() else 1.0
    return values / safe, bound, done


def bounded_attention_flow(
    attentions: Attentions,
    *,
    eps: float = 0.05,
    head_fusion: str = "mean",
    residual_weight: float = 1.0,
    output_tokens: Sequence[int] | None = None,
    attention_mask: torch.Tensor | None = None,
    start_layer: int = 0,
    end_layer: int | None = None,
    progress: ProgressCallback | None = None,
) -> FlowResult:
    """Flow rows (B, k, n) with each Ã row pruned to a share 1 - eps of its mass, and a sound error bound.

    Same conventions as maths.flow.attention_flow (output_tokens default all n; padded tokens 0).
    """
    g = _prepare(attentions, head_fusion, residual_weight, attention_mask, start_layer, end_layer, False, 0.0)
    num_layers, batch, n, _ = g.augmented.shape
    outputs = list(range(n)) if output_tokens is None else [int(t) for t in output_tokens]
    if not outputs or any(not 0 <= t < n for t in outputs):
        raise InputError(f"output_tokens must be positions in 0..{n - 1}, got {output_tokens}")
    result = np.zeros((batch, len(outputs), n))
    total = sum(int(g.real[b].sum()) * sum(bool(g.real[b, t]) for t in outputs) for b in range(batch))
    done, worst = 0, 0.0
    for b in range(batch):
        keep = np.flatnonzero(g.real[b])
        kept = [(row, int(np.searchsorted(keep, t))) for row, t in enumerate(outputs) if g.real[b, t]]
        if not kept:
            continue
        full = [g.augmented[l, b][np.ix_(keep, keep)] for l in range(num_layers)]
        values, bound, done = _bounded_rows(full, [prune_by_mass(a, eps) for a in full], [t for _, t in kept],
                                            progress, done, total)
        worst = max(worst, bound)
        for (row, _), flow in zip(kept, values):
            result[b, row, keep] = flow
    return FlowResult(torch.from_numpy(result).to(device=g.device, dtype=g.dtype), worst)
