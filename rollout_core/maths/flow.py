"""Attention flow (Abnar & Zuidema 2020) on a compiled max-flow solver.

The attention graph has one node per (layer, token), layers 0..L. The edge from input-side node
(l-1, j) to (l, i) has capacity Ã_l[i, j] (residual-augmented, row-normalised, as in rollout). The
flow of input token j into output token i is the maximum flow from node (0, j) to node (L, i); each
output row is then normalised to sum to 1.

The rollout paper's code calls networkx's edmonds_karp once per (output, input) pair in Python. Here one graph per
explained row is built once and its n problems, one per input token, are solved on it by Dinic's algorithm in
compiled code (maths.maxflow), which keeps its residual graph between the problems of a row (scipy's
`maximum_flow` rebuilds it on each call; benchmarks/RESULTS.md compares them). The graph holds only what a row's
problems can use: layer 0 is one source slot whose n out-edges are rewritten per input token (the other layer-0
nodes have no in-edges, so their out-edges carry nothing), and the top layer keeps only the edges into the
explained output (or, for a pooled readout, into the pooled outputs and from them into a super-sink): (L-2)·n² + 2n
edges instead of (L-1)·n² + n. No per-source trick shares more work between input tokens: max flows from several
sources do not add up (a super-source gives their joint maximum, not each share).

Integer capacities (exact arithmetic, so the solver ends): each capacity is scaled by SCALE = 2^40 and rounded to
int64, so it is off by at most 0.5/SCALE. No overflow: a capacity is at most SCALE, and a flow value is at most the
in-capacity of its output node (a row of Ã, sum 1), i.e. SCALE + n/2 after rounding. Error bound: every cut's
capacity moves by at most (edges in the cut)·0.5/SCALE, so each raw flow value (before the row normalisation) is
within E/(2·SCALE) of the exact one, E = number of edges (for the CLS row of a 12-layer, 197-token ViT,
E ≈ 3.9e5: 1.8e-7).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable, Sequence

import numpy as np
import torch

if TYPE_CHECKING:  # numba is imported where a flow is solved: the CLI's rollout path never pays for it
    from rollout_core.maths.maxflow import Network

from rollout_core.cancel import checkpoint
from rollout_core.errors import InputError
from rollout_core.maths.fusion import fuse_heads
from rollout_core.maths.rollout import Attentions, as_layers, augment_layer, compute_dtype, layer_range, real_token_mask

ProgressCallback = Callable[[int, int], None]
SCALE = float(2**40)
Solver = Callable[[Sequence[np.ndarray], "int | None", "np.ndarray | None", Callable[[], None]],
                  tuple[np.ndarray, float]]
"""(layers, output, pool weights, tick) -> (normalised row (n,), error bound of the row)."""


@dataclass
class RowGraph:
    """One explained row's graph: node 0 is the source slot, node 1 + (l-1)·n + m is (l, m)."""

    network: "Network"  # its first n rewritable edges are the source slot's, to (1, 0..n-1)
    slot: np.ndarray  # (n, n) int64, slot[j, i] = scaled Ã_1[i, j]: the source slot's capacities for token j

    def flow(self, j: int) -> float:
        """The max flow from input token j (the source slot standing for it); afterwards `reached` is the
        source side of a minimum cut."""
        return self.network.solve(self.slot[j]) / SCALE

    def reached(self, layers: int) -> np.ndarray:
        """(layers, n) bool: node (l, m) on the source side of the last solved problem's minimum cut, l >= 1."""
        n = self.slot.shape[0]
        return self.network.level[1 : 1 + layers * n].reshape(layers, n) >= 0


def row_graph(layers: Sequence[np.ndarray], output: int | None, pool: np.ndarray | None) -> RowGraph:
    """The graph of one row: into top node `output`, or (pool given) into a super-sink fed by each top
    node i with capacity pool[i]. layers[l] is Ã_(l+1) (n, n), entries [to, from]."""
    from rollout_core.maths.maxflow import network

    n, depth = layers[0].shape[0], len(layers)
    tails, heads, data = [np.zeros(n, np.int64)], [1 + np.arange(n)], [np.ones(n, np.int64)]
    pooled = np.flatnonzero(pool > 0) if pool is not None else None
    for d in range(1, depth):  # edges (d, j) -> (d + 1, i) with capacity Ã_(d+1)[i, j]
        targets = np.arange(n) if d < depth - 1 else (np.array([output]) if pooled is None else pooled)
        capacity = np.rint(layers[d][targets] * SCALE).astype(np.int64)
        to, src = np.nonzero(capacity > 0)
        tails.append(1 + (d - 1) * n + src)
        heads.append(1 + d * n + targets[to])
        data.append(capacity[to, src])
    top = 1 + (depth - 1) * n
    sink = top + int(output) if pooled is None else top + n
    if pooled is not None:
        tails.append(top + pooled)
        heads.append(np.full(len(pooled), sink))
        data.append(np.rint(pool[pooled] * SCALE).astype(np.int64))
    size = top + n + (pooled is not None)
    graph = network(np.concatenate(tails), np.concatenate(heads), np.concatenate(data), size, n, 0, sink)
    return RowGraph(graph, np.ascontiguousarray(np.rint(layers[0] * SCALE).astype(np.int64).T))


def exact_row(layers: Sequence[np.ndarray], output: int | None, pool: np.ndarray | None,
              tick: Callable[[], None]) -> tuple[np.ndarray, float]:
    """The normalised flow row: one max flow per input token on one graph."""
    graph = row_graph(layers, output, pool)
    values = np.zeros(layers[0].shape[0])
    for j in range(len(values)):
        values[j] = graph.flow(j)
        tick()
    total = values.sum()
    return (values / total if total > 0 else values), 0.0


@dataclass
class _Graphs:
    """Inputs shared by the flow functions: every selected layer's Ã as numpy and the real-token mask."""

    augmented: np.ndarray  # (L', B, n, n) float64
    real: np.ndarray  # (B, n) bool
    dtype: torch.dtype
    device: torch.device


def _prepare(attentions: Attentions, head_fusion: str, residual_weight: float, attention_mask: torch.Tensor | None,
             start_layer: int, end_layer: int | None) -> _Graphs:
    all_layers = as_layers(attentions)
    dtype = compute_dtype(all_layers[0].dtype)
    batch, _, n, _ = all_layers[0].shape
    device = all_layers[0].device
    layers = layer_range(len(all_layers), start_layer, end_layer)
    real = real_token_mask(attention_mask, batch, n, device, dtype).bool().cpu().numpy()
    augmented = torch.stack([
        augment_layer(fuse_heads(all_layers[l].to(dtype), head_fusion), residual_weight=residual_weight,
                      attention_mask=attention_mask)
        for l in layers
    ]).cpu().to(torch.float64).numpy()
    return _Graphs(augmented, real, dtype, device)


def flow_rows(
    attentions: Attentions, solve: Solver, *, output_tokens: Sequence[int] | None = None,
    weights: torch.Tensor | None = None, head_fusion: str = "mean", residual_weight: float = 1.0,
    attention_mask: torch.Tensor | None = None, start_layer: int = 0, end_layer: int | None = None,
    progress: ProgressCallback | None = None,
) -> tuple[torch.Tensor, float]:
    """Rows (B, k, n) solved by `solve` (one per output token, or k = 1 pooled row when `weights` is
    given) and the worst error bound `solve` reported. Padded tokens are not in the graph and get 0."""
    g = _prepare(attentions, head_fusion, residual_weight, attention_mask, start_layer, end_layer)
    num_layers, batch, n, _ = g.augmented.shape
    if weights is not None:
        w = torch.as_tensor(weights, dtype=torch.float64).cpu().reshape(batch, -1).numpy()
        if w.shape[1] != n or (w < 0).any() or not np.isfinite(w).all():
            raise InputError(f"pooling weights must be (batch, {n}), finite and >= 0")
        outputs: list[int] = [0]
    else:
        outputs = list(range(n)) if output_tokens is None else [int(t) for t in output_tokens]
        if not outputs or any(not 0 <= t < n for t in outputs):
            raise InputError(f"output_tokens must be positions in 0..{n - 1}, got {output_tokens}")
    jobs = []  # (b, row, output in the real-token graph, pool weights, real positions)
    for b in range(batch):
        keep = np.flatnonzero(g.real[b])
        if weights is not None:
            pool = w[b, keep]
            if pool.sum() > 0:
                jobs.append((b, 0, None, pool / pool.sum(), keep))
        else:
            jobs += [(b, row, int(np.searchsorted(keep, t)), None, keep)
                     for row, t in enumerate(outputs) if g.real[b, t]]
    result = np.zeros((batch, len(outputs), n))
    count = {"done": 0, "total": sum(len(job[4]) for job in jobs)}

    def tick() -> None:
        count["done"] += 1
        checkpoint()  # a stopped page session stops its flow here (rollout_core.cancel)
        if progress is not None:
            progress(count["done"], count["total"])

    worst = 0.0
    for b, row, output, pool, keep in jobs:
        layers = [g.augmented[l, b][np.ix_(keep, keep)] for l in range(num_layers)]
        values, bound = solve(layers, output, pool, tick)
        result[b, row, keep] = values
        worst = max(worst, bound)
    return torch.from_numpy(result).to(device=g.device, dtype=g.dtype), worst


def attention_flow(
    attentions: Attentions,
    *,
    head_fusion: str = "mean",
    residual_weight: float = 1.0,
    output_tokens: Sequence[int] | None = None,
    attention_mask: torch.Tensor | None = None,
    start_layer: int = 0,
    end_layer: int | None = None,
    progress: ProgressCallback | None = None,
) -> torch.Tensor:
    """Exact flow from every input token to each chosen output token, (B, k, n), real rows summing to 1.

    `output_tokens`: positions explained (default all n: n² max-flow problems, see
    maths.flow_bounded.flow_cost_estimate). Padded tokens get exactly 0 and are not in the graph (a
    padded output gets a zero row). `progress(done, total)` is called after each max-flow problem.
    """
    rows, _ = flow_rows(attentions, exact_row, output_tokens=output_tokens, head_fusion=head_fusion,
                        residual_weight=residual_weight, attention_mask=attention_mask, start_layer=start_layer,
                        end_layer=end_layer, progress=progress)
    return rows


def pooled_attention_flow(
    attentions: Attentions,
    weights: torch.Tensor,
    *,
    head_fusion: str = "mean",
    residual_weight: float = 1.0,
    attention_mask: torch.Tensor | None = None,
    start_layer: int = 0,
    end_layer: int | None = None,
    progress: ProgressCallback | None = None,
) -> torch.Tensor:
    """Exact flow from every input token into a pooled readout, (B, n), rows summing to 1.

    A readout that pools several output positions (mean-pooled encoders, DINOv2 classifiers reading
    [CLS] and the patch mean) is one more node: a super-sink fed by each top node i through an edge of
    capacity weights[b, i] (weights are normalised to sum to 1 first). One max-flow problem per input
    token instead of one per (output, input) pair; with one-hot weights it equals attention_flow's row,
    because no more than 1 can flow into a top node (its in-capacities are a row of Ã).
    """
    rows, _ = flow_rows(attentions, exact_row, weights=weights, head_fusion=head_fusion,
                        residual_weight=residual_weight, attention_mask=attention_mask, start_layer=start_layer,
                        end_layer=end_layer, progress=progress)
    return rows[:, 0]
