"""Gradient-weighted rollout (Chefer, Gur & Wolf, ICCV 2021, "Generic Attention-model Explainability").

R = I; for each layer l from the bottom up: R = R + Ā_l · R with Ā_l = mean_heads((∂y/∂A_l ⊙ A_l)⁺).
Unlike plain rollout it is class-specific: y is the score of the explained class. Gradients are paired
with the attention of the SAME layer (popular code zips them in reverse order). R is not renormalised:
its rows are relevance, not shares; displays normalise the explained row themselves.
"""
from __future__ import annotations

import torch

from rollout_core.errors import InputError
from rollout_core.maths.rollout import Attentions, compute_dtype, layer_range, as_layers, real_token_mask


def gradient_rollout(
    attentions: Attentions,
    gradients: Attentions,
    *,
    start_layer: int = 0,
    end_layer: int | None = None,
    attention_mask: torch.Tensor | None = None,
    all_layers: bool = False,
) -> torch.Tensor:
    """Relevance R (B, n, n) (or (L', B, n, n) after each layer with all_layers).

    `gradients[l]` is ∂y/∂attentions[l], same shapes. Padded rows/columns of each Ā_l are zeroed, so
    padded tokens receive exactly 0 off the diagonal and do not feed real tokens.
    """
    attn = as_layers(attentions)
    grad = as_layers(gradients)
    if len(attn) != len(grad) or attn[0].shape != grad[0].shape:
        raise InputError(f"gradients ({len(grad)} x {tuple(grad[0].shape)}) do not match attentions "
                         f"({len(attn)} x {tuple(attn[0].shape)})")
    dtype = compute_dtype(attn[0].dtype)
    batch, _, n, _ = attn[0].shape
    device = attn[0].device
    real = real_token_mask(attention_mask, batch, n, device, dtype)
    pair = real[:, :, None] * real[:, None, :]
    relevance = torch.eye(n, dtype=dtype, device=device).expand(batch, n, n) * real[:, :, None]
    history = []
    for l in layer_range(len(attn), start_layer, end_layer):
        weighted = (grad[l].to(dtype) * attn[l].to(dtype)).clamp_min(0.0).mean(dim=1)
        weighted = torch.nan_to_num(weighted, nan=0.0, posinf=0.0, neginf=0.0) * pair
        relevance = relevance + torch.bmm(weighted, relevance)
        history.append(relevance)
    return torch.stack(history) if all_layers else relevance
