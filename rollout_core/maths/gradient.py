"""Gradient-weighted rollout (Chefer, Gur & Wolf, ICCV 2021, "Generic Attention-model Explainability").

R = I; for each layer l from the bottom up: R = R + Ā_l · R with Ā_l = mean_heads((∂y/∂A_l ⊙ A_l)⁺).
Unlike plain rollout it is class-specific: y is the score of the explained class. Gradients are paired
with the attention of the SAME layer (popular code zips them in reverse order). R is not renormalised:
its rows are relevance, not shares; displays normalise the explained row themselves.
"""
from __future__ import annotations

import torch

from rollout_core.errors import InputError
from rollout_core.maths.rollout import Attentions, compute_dtype, layer_range, real_token_mask, stack_attentions


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
    attn = stack_attentions(attentions)
    grad = stack_attentions(gradients)
    if attn.shape != grad.shape:
        raise InputError(f"gradients shape {tuple(grad.shape)} differs from attentions {tuple(attn.shape)}")
    dtype = compute_dtype(attn.dtype)
    _, batch, _, n, _ = attn.shape
    real = real_token_mask(attention_mask, batch, n, attn.device, dtype)
    pair = real[:, :, None] * real[:, None, :]
    relevance = torch.eye(n, dtype=dtype, device=attn.device).expand(batch, n, n) * real[:, :, None]
    history = []
    for l in layer_range(attn.shape[0], start_layer, end_layer):
        weighted = (grad[l].to(dtype) * attn[l].to(dtype)).clamp_min(0.0).mean(dim=1)
        weighted = torch.nan_to_num(weighted, nan=0.0, posinf=0.0, neginf=0.0) * pair
        relevance = relevance + torch.bmm(weighted, relevance)
        history.append(relevance)
    return torch.stack(history) if all_layers else relevance
