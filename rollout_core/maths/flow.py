"""Attention flow (Abnar & Zuidema 2020) on a compiled max-flow solver.

The attention graph has one node per (layer, token), layers 0..L. The edge from input-side node
(l-1, j) to (l, i) has capacity Ã_l[i, j] (residual-augmented, row-normalised, as in rollout). The
flow of input token j into output token i is the maximum flow from node (0, j) to node (L, i); each
output row is then normalised to sum to 1.

The rollout paper's code calls networkx's edmonds_karp once per (output, input) pair in Python.
Here the graph of one sample is built once as a CSR matrix and scipy's Dinic solver (C code) is
called per pair with only the source changing. The top layer only keeps the edges into the
requested output nodes: edges into other top nodes end nowhere, so the values are unchanged.

Integer capacities (scipy needs int32): each capacity is scaled by SCALE = 2^30 and rounded, so it is
off by at most 0.5/SCALE. No int32 overflow: a capacity is at most SCALE, and a flow value is at most
the in-capacity of its output node (a row of Ã, sum 1), i.e. SCALE + n/2 after rounding. Error bound:
every cut's capacity moves by at most (edges in the cut)·0.5/SCALE, so each raw flow value (before the
row normalisation) is within E/(2·SCALE) of the exact one, E = number of edges (for the CLS row of a
12-layer, 197-token ViT, E ≈ 4.3e5: 2e-4). Measured against networkx: ~1e-8 (benchmarks/bench_flow.py).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable, Sequence

import numpy as np
import torch
if TYPE_CHECKING:  # scipy is imported where a flow is solved: the CLI's rollout path never pays for it
    from scipy.sparse import csr_matrix

from rollout_core.budget import checkpoint
from rollout_core.errors import InputError
from rollout_core.maths.fusion import fuse_heads
from rollout_core.maths.rollout import Attentions, as_layers, augment_layer, compute_dtype, layer_range, real_token_mask

ProgressCallback = Callable[[int, int], None]
SCALE = float(2**30)


def _flow_graph(layers: Sequence[np.ndarray], outputs: Sequence[int], prune_threshold: float) -> csr_matrix:
    """CSR graph of the layered attention graph of one sample; layers[l] is Ã_(l+1) (n, n).

    With prune_threshold > 0, an edge is dropped when its capacity is below prune_threshold times the
    largest capacity into the same node; the largest one always stays, so no node is cut off.
    """
    n = layers[0].shape[0]
    rows, cols, data = [], [], []
    for depth, augmented in enumerate(layers):
        if depth == len(layers) - 1:  # top layer: only the edges into the requested outputs
            targets = np.asarray(outputs)
            augmented = np.zeros_like(augmented)
            augmented[targets] = layers[-1][targets]
        kept = augmented > 0
        if prune_threshold > 0:
            kept &= augmented >= prune_threshold * augmented.max(axis=1, keepdims=True)
        out_idx, in_idx = np.nonzero(kept)
        capacity = np.rint(augmented[out_idx, in_idx] * SCALE).astype(np.int64)
        positive = capacity > 0
        rows.append(depth * n + in_idx[positive])  # from (depth, j)
        cols.append((depth + 1) * n + out_idx[positive])  # to (depth + 1, i)
        data.append(capacity[positive])
    num_nodes = n * (len(layers) + 1)
    from scipy.sparse import csr_matrix

    return csr_matrix(
        (np.concatenate(data).astype(np.int32), (np.concatenate(rows), np.concatenate(cols))),
        shape=(num_nodes, num_nodes),
    )


def _flow_rows(
    layers: Sequence[np.ndarray], outputs: Sequence[int], prune_threshold: float,
    progress: ProgressCallback | None, done: int, total: int,
) -> tuple[np.ndarray, int]:
    """Normalised flow rows (k, n) of one sample, one graph for all k·n max-flow problems."""
    from scipy.sparse.csgraph import maximum_flow

    n = layers[0].shape[0]
    graph = _flow_graph(layers, outputs, prune_threshold)
    top = n * len(layers)
    values = np.zeros((len(outputs), n), dtype=np.float64)
    for row, output in enumerate(outputs):
        for source in range(n):
            values[row, source] = maximum_flow(graph, source, top + output, method="dinic").flow_value / SCALE
            done += 1
            checkpoint()
            if progress is not None:
                progress(done, total)
    sums = values.sum(axis=1, keepdims=True)
    return np.divide(values, sums, out=np.zeros_like(values), where=sums > 0), done


@dataclass
class _Graphs:
    """Inputs shared by the flow functions: every selected layer's Ã as numpy and the real-token mask."""

    augmented: np.ndarray  # (L', B, n, n) float64
    real: np.ndarray  # (B, n) bool
    threshold: float  # 0 for exact flow
    dtype: torch.dtype
    device: torch.device


def _prepare(attentions: Attentions, head_fusion: str, residual_weight: float, attention_mask: torch.Tensor | None,
             start_layer: int, end_layer: int | None, approximate: bool, prune_threshold: float) -> _Graphs:
    all_layers = as_layers(attentions)
    dtype = compute_dtype(all_layers[0].dtype)
    batch, _, n, _ = all_layers[0].shape
    device = all_layers[0].device
    layers = layer_range(len(all_layers), start_layer, end_layer)
    if not 0.0 <= float(prune_threshold) < 1.0:
        raise InputError(f"prune_threshold must be in [0, 1), got {prune_threshold}")
    real = real_token_mask(attention_mask, batch, n, device, dtype).bool().cpu().numpy()
    augmented = torch.stack([
        augment_layer(fuse_heads(all_layers[l].to(dtype), head_fusion), residual_weight=residual_weight,
                      attention_mask=attention_mask)
        for l in layers
    ]).cpu().to(torch.float64).numpy()
    return _Graphs(augmented, real, float(prune_threshold) if approximate else 0.0, dtype, device)


def attention_flow(
    attentions: Attentions,
    *,
    head_fusion: str = "mean",
    residual_weight: float = 1.0,
    output_tokens: Sequence[int] | None = None,
    attention_mask: torch.Tensor | None = None,
    start_layer: int = 0,
    end_layer: int | None = None,
    approximate: bool = False,
    prune_threshold: float = 1e-2,
    progress: ProgressCallback | None = None,
) -> torch.Tensor:
    """Flow from every input token to each chosen output token, (B, k, n), real rows summing to 1.

    `output_tokens`: positions explained (default all n). Padded tokens get exactly 0 and are not in
    the graph (a padded output gets a zero row). `approximate=True` drops every edge whose capacity is
    below `prune_threshold` (in [0, 1)) times the largest capacity into the same node: a sparser graph,
    never a disconnected node. Its error is measured, not bounded (tests/test_flow.py,
    benchmarks/bench_flow.py). `progress(done, total)` is called after each max-flow problem.
    """
    g = _prepare(attentions, head_fusion, residual_weight, attention_mask, start_layer, end_layer, approximate,
                 prune_threshold)
    augmented, real, threshold, dtype, device = g.augmented, g.real, g.threshold, g.dtype, g.device
    num_layers, batch, n, _ = augmented.shape
    outputs = list(range(n)) if output_tokens is None else [int(t) for t in output_tokens]
    if not outputs or any(not 0 <= t < n for t in outputs):
        raise InputError(f"output_tokens must be positions in 0..{n - 1}, got {output_tokens}")
    result = np.zeros((batch, len(outputs), n), dtype=np.float64)
    total = sum(int(real[b].sum()) * sum(bool(real[b, t]) for t in outputs) for b in range(batch))
    done = 0
    for b in range(batch):
        keep = np.flatnonzero(real[b])
        kept_outputs = [(row, int(np.searchsorted(keep, t))) for row, t in enumerate(outputs) if real[b, t]]
        if not kept_outputs:
            continue
        sample_layers = [augmented[l, b][np.ix_(keep, keep)] for l in range(num_layers)]
        values, done = _flow_rows(sample_layers, [t for _, t in kept_outputs], threshold, progress, done, total)
        for (row, _), flow in zip(kept_outputs, values):
            result[b, row, keep] = flow
    return torch.from_numpy(result).to(device=device, dtype=dtype)


def _pooled_graph(layers: Sequence[np.ndarray], weights: np.ndarray, prune_threshold: float) -> csr_matrix:
    """The layered graph plus one super-sink fed by each top node i with capacity weights[i]."""
    outputs = np.flatnonzero(weights > 0)
    graph = _flow_graph(layers, outputs, prune_threshold).tocoo()
    n = layers[0].shape[0]
    sink = graph.shape[0]
    capacity = np.rint(weights[outputs] * SCALE).astype(np.int64)
    rows = np.concatenate([graph.row, len(layers) * n + outputs])
    cols = np.concatenate([graph.col, np.full(len(outputs), sink)])
    data = np.concatenate([graph.data.astype(np.int64), capacity]).astype(np.int32)
    from scipy.sparse import csr_matrix

    from scipy.sparse import csr_matrix

    return csr_matrix((data, (rows, cols)), shape=(sink + 1, sink + 1))


def pooled_attention_flow(
    attentions: Attentions,
    weights: torch.Tensor,
    *,
    head_fusion: str = "mean",
    residual_weight: float = 1.0,
    attention_mask: torch.Tensor | None = None,
    start_layer: int = 0,
    end_layer: int | None = None,
    approximate: bool = False,
    prune_threshold: float = 1e-2,
    progress: ProgressCallback | None = None,
) -> torch.Tensor:
    """Flow from every input token into a pooled readout, (B, n), rows summing to 1.

    A readout that pools several output positions (mean-pooled encoders, DINOv2 classifiers reading
    [CLS] and the patch mean) is one more node: a super-sink fed by each top node i through an edge of
    capacity weights[b, i] (weights are normalised to sum to 1 first). One max-flow problem per input
    token instead of one per (output, input) pair; with one-hot weights it equals attention_flow's row,
    because no more than 1 can flow into a top node (its in-capacities are a row of Ã).
    """
    g = _prepare(attentions, head_fusion, residual_weight, attention_mask, start_layer, end_layer, approximate,
                 prune_threshold)
    augmented, real, threshold, dtype, device = g.augmented, g.real, g.threshold, g.dtype, g.device
    num_layers, batch, n, _ = augmented.shape
    w = torch.as_tensor(weights, dtype=torch.float64).cpu().reshape(batch, -1).numpy()
    if w.shape[1] != n or (w < 0).any() or not np.isfinite(w).all():
        raise InputError(f"pooling weights must be (batch, {n}), finite and >= 0")
    from scipy.sparse.csgraph import maximum_flow

    result = np.zeros((batch, n), dtype=np.float64)
    total, done = int(real.sum()), 0
    for b in range(batch):
        keep = np.flatnonzero(real[b])
        pool = w[b, keep]
        if pool.sum() <= 0:
            continue
        graph = _pooled_graph([augmented[l, b][np.ix_(keep, keep)] for l in range(num_layers)],
                              pool / pool.sum(), threshold)
        sink = graph.shape[0] - 1
        values = np.zeros(len(keep))
        for source in range(len(keep)):
            values[source] = maximum_flow(graph, source, sink, method="dinic").flow_value / SCALE
            done += 1
            checkpoint()
            if progress is not None:
                progress(done, total)
        if values.sum() > 0:
            result[b, keep] = values / values.sum()
    return torch.from_numpy(result).to(device=device, dtype=dtype)
