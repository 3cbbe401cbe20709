"""Attention flow (Abnar & Zuidema 2020) on a compiled max-flow solver.

The attention graph has one node per (layer, token), layers 0..L. The edge from input-side node
(l-1, j) to (l, i) has capacity Ã_l[i, j] (residual-augmented, row-normalised, as in rollout). The
flow of input token j into output token i is the maximum flow from node (0, j) to node (L, i); each
output row is then normalised to sum to 1.

The rollout paper's code calls networkx's edmonds_karp once per (output, input) pair in Python.
Here the graph of one sample is built once as a CSR matrix and scipy's Dinic solver (C code) is
called per pair with only the source changing. scipy needs integer capacities: they are scaled by
`scale` and rounded, so each capacity is off by at most 0.5/scale and a flow value by at most
(number of edges in a minimum cut) * 0.5/scale before normalisation.
"""
from __future__ import annotations

from typing import Callable, Sequence

import numpy as np
import torch
from scipy.sparse import csr_matrix
from scipy.sparse.csgraph import maximum_flow

from rollout_core.errors import InputError
from rollout_core.maths.fusion import fuse_heads
from rollout_core.maths.rollout import Attentions, augment_layer, compute_dtype, as_layers, real_token_mask

ProgressCallback = Callable[[int, int], None]
INT32_MAX = 2**31 - 1


def _capacity_scale(n: int) -> float:
    """Largest scale whose total flow cannot overflow int32: a flow is at most n (column sums of n
    row-stochastic rows), and each node's in/out capacity is at most n as well."""
    return float(INT32_MAX // (4 * max(n, 1)))


def _flow_graph(layers: Sequence[np.ndarray], scale: float, prune_below: float) -> csr_matrix:
    """CSR graph of the layered attention graph for one sample; layers[l] is Ã_(l+1) (n, n)."""
    n = layers[0].shape[0]
    num_nodes = n * (len(layers) + 1)
    rows, cols, data = [], [], []
    for depth, augmented in enumerate(layers):
        out_idx, in_idx = np.nonzero(augmented > prune_below)
        capacity = np.rint(augmented[out_idx, in_idx] * scale).astype(np.int64)
        keep = capacity > 0
        rows.append(depth * n + in_idx[keep])  # from (depth, j)
        cols.append((depth + 1) * n + out_idx[keep])  # to (depth + 1, i)
        data.append(capacity[keep])
    return csr_matrix(
        (np.concatenate(data).astype(np.int32), (np.concatenate(rows), np.concatenate(cols))),
        shape=(num_nodes, num_nodes),
    )


def _flow_rows(
    layers: Sequence[np.ndarray], outputs: Sequence[int], scale: float, prune_below: float,
    progress: ProgressCallback | None, done: int, total: int,
) -> tuple[np.ndarray, int]:
    n = layers[0].shape[0]
    graph = _flow_graph(layers, scale, prune_below)
    top = n * len(layers)
    values = np.zeros((len(outputs), n), dtype=np.float64)
    for row, output in enumerate(outputs):
        for source in range(n):
            values[row, source] = maximum_flow(graph, source, top + output, method="dinic").flow_value / scale
            done += 1
            if progress is not None:
                progress(done, total)
    sums = values.sum(axis=1, keepdims=True)
    return np.divide(values, sums, out=np.zeros_like(values), where=sums > 0), done


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
    prune_threshold: float = 1e-3,
    progress: ProgressCallback | None = None,
) -> torch.Tensor:
    """Flow from every input token to each chosen output token, (B, k, n), rows summing to 1.

    `output_tokens`: positions explained (default all n). Padded tokens get exactly 0 and are not in
    the graph. `approximate=True` drops edges whose capacity is below `prune_threshold` (the graph of a
    real model is then much sparser); the error this causes is measured in tests/benchmarks, not bounded.
    `progress(done, total)` is called after each max-flow problem.
    """
    all_layers = as_layers(attentions)
    dtype = compute_dtype(all_layers[0].dtype)
    batch, _, n, _ = all_layers[0].shape
    device = all_layers[0].device
    layers = range(len(all_layers))[start_layer:end_layer]
    if len(layers) == 0:
        raise InputError(f"layer range start_layer={start_layer}, end_layer={end_layer} selects no layer")
    outputs = list(range(n)) if output_tokens is None else [int(t) for t in output_tokens]
    if not outputs or any(not 0 <= t < n for t in outputs):
        raise InputError(f"output_tokens must be positions in 0..{n - 1}, got {output_tokens}")
    real = real_token_mask(attention_mask, batch, n, device, dtype).bool().cpu().numpy()
    augmented = torch.stack([
        augment_layer(fuse_heads(all_layers[l].to(dtype), head_fusion), residual_weight=residual_weight,
                      attention_mask=attention_mask)
        for l in layers
    ]).cpu().to(torch.float64).numpy()  # (L', B, n, n)
    prune_below = prune_threshold if approximate else 0.0
    result = np.zeros((batch, len(outputs), n), dtype=np.float64)
    total = sum(int(real[b].sum()) * sum(bool(real[b, t]) for t in outputs) for b in range(batch))
    done = 0
    for b in range(batch):
        keep = np.flatnonzero(real[b])
        kept_outputs = [(row, int(np.searchsorted(keep, t))) for row, t in enumerate(outputs) if real[b, t]]
        if not kept_outputs:
            continue
        sample_layers = [augmented[l, b][np.ix_(keep, keep)] for l in range(len(layers))]
        values, done = _flow_rows(sample_layers, [t for _, t in kept_outputs], _capacity_scale(len(keep)),
                                  prune_below, progress, done, total)
        for (row, _), flow in zip(kept_outputs, values):
            result[b, row, keep] = flow
    return torch.from_numpy(result).to(device=device, dtype=dtype)
