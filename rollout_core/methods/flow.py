"""Attention flow (Abnar & Zuidema 2020): the max flow from an output to each input through the layer graph."""
from __future__ import annotations

from typing import TYPE_CHECKING, Sequence

from rollout_core.methods._spec import MethodInput, MethodOutput, MethodSpec

if TYPE_CHECKING:
    import torch

    from rollout_core.options import Options


def compute(method_input: MethodInput) -> MethodOutput:
    """The flow rows after each layer of the range; the whole final flow matrix when the caller wants it."""
    rows, matrix = _flow(method_input.captured.attentions, method_input.weights, method_input.mask,
                         method_input.options, full=method_input.full_matrix)
    return MethodOutput(layer_rows=rows, matrix=matrix)


def _flow(
    atts: "Sequence[torch.Tensor]", weights: "torch.Tensor", mask: "torch.Tensor | None", opts: "Options", full: bool
) -> "tuple[torch.Tensor, torch.Tensor | None]":
    """Attention flow: the explained rows after each layer (L', B, n) (one max-flow problem per layer
    prefix) and, when `full` (text), the whole final flow matrix.

    A readout of one position per sample ([CLS], the predicted position) uses that output's flow row. A
    pooled readout (mean pooling, DINOv2's [CLS] + patch mean) is the flow into a super-sink fed by the
    pooled positions (maths.flow.pooled_attention_flow): one problem per input token, not one per
    (output, input) pair, which on a 257-token image was the difference between seconds and hours.
    Images (`full` False) use the approximate flow (edges below the prune threshold dropped): exact flow
    on a 257-token, 12-layer DINOv2 takes ~23 s for the final CLS row alone and ~114 s with the slider's
    prefixes, the approximate one ~3 s / ~10 s (measured on 1 CPU thread)."""
    import torch

    from rollout_core.maths.flow import attention_flow, pooled_attention_flow

    options = dict(head_fusion=opts.head_fusion, residual_weight=opts.residual_weight, attention_mask=mask,
                   start_layer=opts.start_layer, approximate=not full)
    single = bool(((weights > 0).sum(-1) == 1).all())
    outputs = torch.nonzero(weights.sum(0)).flatten().tolist()
    rows, matrix = [], None
    for top in range(opts.start_layer + 1, opts.end_layer + 1):
        if not single:
            rows.append(pooled_attention_flow(atts, weights, end_layer=top, **options).double())
            continue
        tokens = None if (full and top == opts.end_layer) else outputs
        flow = attention_flow(atts, output_tokens=tokens, end_layer=top, **options).double()
        if tokens is None:
            matrix, flow = flow, flow[:, outputs]
        rows.append(torch.einsum("bk,bkn->bn", weights[:, outputs].double(), flow))
    if full and matrix is None:
        matrix = attention_flow(atts, end_layer=opts.end_layer, **options).double()
    return torch.stack(rows), matrix



METHOD = MethodSpec(
    name="flow",
    title="Attention flow",
    phrase="attention flow",
    description="Treats the residual-augmented attention of every layer as edge capacities and takes the maximum flow.",
    order=1,
    compute=compute,
)
