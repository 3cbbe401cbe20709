"""The step the contribution methods share: per-layer contribution matrices -> their rollout after each layer."""
from __future__ import annotations

from typing import TYPE_CHECKING

from rollout_core.methods._rows import rows_of
from rollout_core.methods._spec import MethodInput, MethodOutput

if TYPE_CHECKING:
    import torch


def contribution_rollout(per_layer: "torch.Tensor", method_input: MethodInput, *,
                         residual_weight: float) -> MethodOutput:
    """`per_layer`: (L, B, n, n) row-normalised contributions of every model layer. Each layer of the chosen range
    is augmented like attention in rollout (discard, + residual_weight * I, rows renormalised) and multiplied;
    residual_weight 0 for measures that already contain the residual stream (ALTI, value zeroing).
    The range's own per-layer matrices become `layer_maps` (the slider's per-layer view)."""
    from rollout_core.maths.rollout import attention_rollout

    o = method_input.options
    cumulative = attention_rollout(per_layer[:, :, None], head_fusion="mean", residual_weight=residual_weight,
                                   discard_ratio=o.discard_ratio, start_layer=o.start_layer, end_layer=o.end_layer,
                                   attention_mask=method_input.mask, all_layers=True)
    out = rows_of(cumulative, method_input)
    out.layer_maps = per_layer[o.start_layer:o.end_layer].to(cumulative.dtype)
    return out


def row_normalised(contributions: "torch.Tensor") -> "torch.Tensor":
    """Rows divided by their sum (all-zero rows, i.e. padding, stay 0)."""
    import torch

    total = contributions.sum(-1, keepdim=True)
    return contributions / total.clamp_min(torch.finfo(contributions.dtype).tiny)
