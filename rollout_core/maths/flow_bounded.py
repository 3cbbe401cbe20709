"""Approximate attention flow with a sound, per-result error bound, and an up-front cost estimate.

Pruning by mass: each row of every Ã keeps the smallest set of its largest edges holding at least a share
(1 - eps) of the row's mass; the rest is dropped. Max flow is then solved on the pruned graph G'.

Bound (a posteriori, sound): let f' be the pruned max flow and (S, T) the min cut the solver leaves (a trivial
cut it saturated, or the nodes its last search reaches in the residual graph of G', maths.maxflow). In the full
graph G the same cut has capacity f' + d, d = the capacity of the pruned edges from S to T, and every cut bounds
the max flow, so f' <= f <= f' + d. Per output row with raw values v'_j, bounds d_j, S' = sum v'_j, D = sum d_j, the
normalised values v_j / S lie in [v'_j / (S' + D), (v'_j + d_j) / S'], so
|v_j/S - v'_j/S'| <= max(d_j / S', v'_j * D / (S' (S' + D))). That maximum over the row is the reported bound
(up to the 2^-40 integer rounding of maths.flow). d_j is summed layer by layer as (1 - s_l)ᵀ R_l s_(l-1),
R_l the pruned part of Ã_l and s_l the indicator of S in layer l, for all input tokens at once.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np
import torch

from rollout_core.errors import InputError
from rollout_core.maths.flow import ProgressCallback, attention_flow, flow_rows, row_graph
from rollout_core.maths.rollout import Attentions

# Seconds per max-flow problem per graph edge of maths.maxflow's solver on a 2-core CPU (fitted by
# benchmarks/bench_flow_row.py, figures in benchmarks/RESULTS.md). Real attention runs near it; diffuse attention, where
# every solve stops at a trivial cut (maths.maxflow), runs faster, so there the estimate runs high.
SECONDS_PER_EDGE = 1.0e-8
DEFAULT_EPS = 0.2
"""Pruned share of each row's mass: the largest that keeps default-image's bound at 0 and still saves time; larger
shares loosen the bound without a gain, and 0.4 makes it vacuous (benchmarks/RESULTS.md, the bounded-flow tables)."""
PRUNED_EDGE_SHARE = 0.2
"""Share of the pruned layers' edges that pruning at DEFAULT_EPS keeps, for cost estimates: 4-21% per layer (mean 13%)
on default-image's attention. Diffuse attention keeps more, so there the estimate runs low."""


@dataclass
class FlowResult:
    """Flow rows (B, k, n) and the bound on their absolute error (0.0 for exact flow)."""

    values: torch.Tensor
    error_bound: float


def flow_cost_estimate(n: int, layers: int, rows: int, *, outputs: int = 1, kept: float = 1.0) -> dict[str, float]:
    """Cost of flow for `rows` output rows of an n-token input through `layers` layers.

    Returns the number of max-flow problems (rows * n) and an estimate of the seconds they take: each problem
    walks one row's graph (maths.flow.row_graph), n source-slot edges plus max(layers - 2, 0) * n^2 between
    middle layers plus outputs * n into the top layer (`outputs`: the positions a pooled readout reads, 1 for a
    single output); `kept` is the share of the latter two that pruning leaves (1.0: exact flow).
    """
    if n < 1 or layers < 1 or rows < 0 or outputs < 1 or not 0.0 < kept <= 1.0:
        raise InputError(f"flow_cost_estimate needs n, layers, outputs >= 1, rows >= 0 and kept in (0, 1], got "
                         f"n={n}, layers={layers}, outputs={outputs}, rows={rows}, kept={kept}")
    problems = rows * n
    edges = n + kept * (max(layers - 2, 0) * n * n + (min(outputs, n) * n if layers > 1 else 0))
    return {"max_flows": float(problems), "seconds": problems * edges * SECONDS_PER_EDGE}


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


def _bounded_row(eps: float) -> Callable:
    def solve(full: Sequence[np.ndarray], output: int | None, pool: np.ndarray | None,
              tick: Callable[[], None]) -> tuple[np.ndarray, float]:
        n, depth = full[0].shape[0], len(full)
        # the source slot's edges and a single output's in-edges are n each: pruning them saves nothing
        dense = range(1, depth - 1) if pool is None else range(1, depth)
        pruned = [prune_by_mass(a, eps) if l in dense else a for l, a in enumerate(full)]
        removed = [f - p for f, p in zip(full, pruned)]
        kept = [output] if pool is None else pool > 0  # edges into other top nodes end nowhere: not cut
        top = np.zeros_like(removed[-1])
        top[kept] = removed[-1][kept]
        removed[-1] = top
        graph = row_graph(pruned, output, pool)
        values = np.zeros(n)
        reach = np.zeros((n, depth, n), dtype=bool)  # reach[j, l - 1, m]: node (l, m) on the source side
        for j in range(n):
            values[j] = graph.flow(j)
            reach[j] = graph.reached(depth)
            tick()
        slack = (~reach[:, 0, :] * removed[0].T).sum(axis=1)  # source slot j -> (1, m)
        for l in range(1, depth):
            slack += ((~reach[:, l, :]).astype(float) @ removed[l] * reach[:, l - 1, :]).sum(axis=1)
        return _normalise_with_bound(values, slack)
    return solve


def _normalise_with_bound(values: np.ndarray, slack: np.ndarray) -> tuple[np.ndarray, float]:
    total, spread = values.sum(), slack.sum()
    if total <= 0:
        return values, 1.0
    bound = np.maximum(slack / total, values * spread / (total * (total + spread)))
    return values / total, float(bound.max())


def bounded_attention_flow(
    attentions: Attentions,
    *,
    eps: float = DEFAULT_EPS,
    head_fusion: str = "mean",
    residual_weight: float = 1.0,
    output_tokens: Sequence[int] | None = None,
    weights: torch.Tensor | None = None,
    attention_mask: torch.Tensor | None = None,
    start_layer: int = 0,
    end_layer: int | None = None,
    progress: ProgressCallback | None = None,
) -> FlowResult:
    """Flow rows (B, k, n) with each Ã row pruned to a share 1 - eps of its mass, and a sound error bound.

    Same conventions as maths.flow.attention_flow (output_tokens default all n; padded tokens 0); with
    `weights` (B, n) the one row (k = 1) is the pooled readout of maths.flow.pooled_attention_flow.
    """
    if not 0.0 <= eps < 1.0:
        raise InputError(f"the pruned mass share eps must be in [0, 1), got {eps}")
    values, bound = flow_rows(attentions, _bounded_row(float(eps)), output_tokens=output_tokens, weights=weights,
                              head_fusion=head_fusion, residual_weight=residual_weight,
                              attention_mask=attention_mask, start_layer=start_layer, end_layer=end_layer,
                              progress=progress)
    return FlowResult(values, bound)


def warm_up() -> None:
    """Solve a tiny exact and a tiny bounded flow, so numba's kernels (maths.maxflow) are loaded in this process, or
    compiled into its on-disk cache when absent: the first flow a user asks for then costs what later ones do (a
    fresh process's first flow paid 1-3 s for loading them, 15 s when they were not cached)."""
    generator = torch.Generator().manual_seed(0)
    attentions = torch.rand(2, 1, 1, 4, 4, generator=generator).softmax(-1)
    attention_flow(attentions, output_tokens=[0])
    bounded_attention_flow(attentions, output_tokens=[0])
