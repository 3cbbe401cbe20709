"""The pieces the methods' cost estimates are built from: a forward pass, a backward pass, the product of n x n
matrices through the layers, and per-layer work on every (output, input) pair. Each method's module adds them up
in its own `cost(Workload)`; the constants are measured on this project's 2-core CPU machine by
benchmarks/bench_method_costs.py (estimate vs measured side by side in benchmarks/RESULTS.md)."""
from __future__ import annotations

from rollout_core.methods._spec import Workload

MATMUL_FLOPS_PER_SECOND = 7.0e10
"""Dense float32 matrix products (the forward pass's projections and MLP) on one request's thread pool."""
LAYER_OVERHEAD_SECONDS = 1.4e-3
"""Per layer and pass: Python, hooks, kernel launches and the small operations around the products (what a forward
pass of a few tokens costs per layer)."""
PAIR_SECONDS = 1.5e-8
"""Per layer, (output, input) pair and head: the contribution methods' passes over every head's attention weights
(the norms' per-head Gram products; ALTI's transformed vectors are this per hidden unit, `alti.ALTI_PAIR_FACTOR`)."""
PRODUCT_FLOPS_PER_SECOND = 1.0e10
"""The n x n products of a rollout (every layer's cumulative product is kept)."""
REQUEST_SECONDS = 0.006
"""Per call, whatever the method: tokenising the text or decoding and resizing the image, assembling the
explanation (a corpus batch of 16 rows pays it once)."""


def forward_seconds(w: Workload, passes: float = 1.0) -> float:
    """`passes` forward passes of the whole encoder on `w.batch` inputs of `w.tokens` positions (`pass_seconds`),
    plus the call's own handling once."""
    return REQUEST_SECONDS + passes * pass_seconds(w, w.batch)


def pass_seconds(w: Workload, rows: float = 1.0) -> float:
    """One pass of the encoder on `rows` inputs of `w.tokens` positions stacked in one batch: the per-layer overhead
    once, whatever the batch, and each row's products."""
    return w.model_layers * LAYER_OVERHEAD_SECONDS + rows * matmul_seconds(w)


def matmul_seconds(w: Workload) -> float:
    """The dense products of one forward pass of one input (no per-layer overhead): 24 n d^2 multiply-adds for the
    projections and MLP (4x wide) and 4 n^2 d for attention, per layer."""
    n, d = w.tokens, w.hidden
    return w.model_layers * (24 * n * d * d + 4 * n * n * d) / MATMUL_FLOPS_PER_SECOND


def product_seconds(w: Workload) -> float:
    """The product of the range's n x n matrices: one n x n by n x n product per layer after the first (also what
    keeping every layer's cumulative product costs)."""
    return w.batch * max(w.layers - 1, 0) * 2 * w.tokens ** 3 / PRODUCT_FLOPS_PER_SECOND


def rows_seconds(w: Workload) -> float:
    """A rolled-out method's explained row after every layer of the range (`methods._rows.rolled_out`): carried
    down from the top layer, L'(L'+1)/2 row-by-matrix products; its final n x n product is left to whoever reads
    it (`product_seconds` when a method computes it)."""
    return w.batch * w.layers * (w.layers + 1) // 2 * 2 * w.tokens ** 2 / PRODUCT_FLOPS_PER_SECOND


def pair_seconds(w: Workload, factor: float = 1.0) -> float:
    """Per-layer work on every (output, input) pair and head (the norms' and ALTI's per-head passes over the
    attention), `factor` times the measured unit, plus the per-layer overhead of the method's own calls on each layer
    of the range (once per layer, whatever the batch)."""
    pairs = w.batch * w.tokens * w.tokens * w.heads * PAIR_SECONDS
    return w.layers * (factor * pairs + LAYER_OVERHEAD_SECONDS)
