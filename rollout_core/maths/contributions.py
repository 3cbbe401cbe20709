"""Contribution measures computed from one recorded forward pass (see rollout_core.models.layer_access).

Norm-based (Kobayashi et al. 2020): C_ij = || sum_h alpha^h_ij f^h(x_j) ||, f^h(x) = (x W_V^h + b_V^h) W_O^h.
ALTI (Ferrando et al. 2022): y_i = sum_j T_i(x_j) (+ bias terms), c_ij = max(0, ||y_i||_1 - ||y_i - T_i(x_j)||_1),
rows normalised over the real tokens. Both return (L, B, n, n); padding rows and columns are exactly 0.
"""
from __future__ import annotations

import torch

from rollout_core.models.layer_access import LayerAccess, Recorded


def _head_vectors(acc: LayerAccess, x: torch.Tensor, probs: torch.Tensor) -> torch.Tensor:
    """alpha^h_ij f^h(x_j) summed over heads: (B, n_i, n_j, d). x is the attention input (B, n, d)."""
    b, n, _ = x.shape
    h = acc.num_heads
    v = acc.value(x).view(b, n, h, -1)  # x W_V + b_V per head
    w_o = acc.output.weight.view(acc.output.weight.shape[0], h, -1)  # (d, H, dh)
    f = torch.einsum("bjhe,dhe->bhjd", v, w_o)  # f^h(x_j)
    return torch.einsum("bhij,bhjd->bijd", probs.to(f.dtype), f)


def _mask(attention_mask: torch.Tensor | None, b: int, n: int, device: torch.device) -> torch.Tensor:
    if attention_mask is None:
        return torch.ones(b, n, dtype=torch.bool, device=device)
    return attention_mask.to(device).bool()


def norm_contributions(recorded: Recorded, attention_mask: torch.Tensor | None = None) -> torch.Tensor:
    """Raw norms ||sum_h alpha^h_ij f^h(x_j)|| per layer: (L, B, n, n), not normalised; padding exactly 0."""
    out = []
    for acc, x, probs in zip(recorded.layers, recorded.attn_input, recorded.probs):
        with torch.no_grad():
            c = _head_vectors(acc, x, probs).norm(dim=-1)
        real = _mask(attention_mask, *c.shape[:2], c.device)
        out.append(c * (real[:, :, None] & real[:, None, :]))
    return torch.stack(out)


def transformed_vectors(acc: LayerAccess, x: torch.Tensor, attn_in: torch.Tensor,
                        probs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(T, bias): T[b, i, j] = T_i(x_j) (B, n, n, d) and the per-output bias (B, n, d), sum_j T_i(x_j) + bias
    being the attention block's output. Post-LN: LN(attn + x) linearised with the observed std (constant);
    pre-LN: x + scale * attn(LN1(x)), exact (LN1 acts on each token alone, so LN1(x_j) belongs to x_j)."""
    z = _head_vectors(acc, attn_in, probs)  # (B, n, n, d)
    eye = torch.eye(x.shape[1], dtype=z.dtype, device=z.device)
    b_o = acc.output.bias if acc.output.bias is not None else torch.zeros_like(x[0, 0])
    if not acc.post_ln:
        scale = acc.layer_scale if acc.layer_scale is not None else torch.ones_like(b_o)
        t = z * scale + eye[None, :, :, None] * x[:, None, :, :]
        return t, (b_o * scale).expand_as(x)
    z = z + eye[None, :, :, None] * x[:, None, :, :]  # residual
    pre = z.sum(dim=2) + b_o  # the LN's actual input
    std = (pre.var(dim=-1, unbiased=False, keepdim=True) + acc.norm.eps).sqrt()  # (B, n, 1)
    gamma = acc.norm.weight
    t = gamma * (z - z.mean(dim=-1, keepdim=True)) / std[:, :, None, :]
    bias = gamma * (b_o - b_o.mean()) / std + acc.norm.bias
    return t, bias


def alti_contributions(recorded: Recorded, attention_mask: torch.Tensor | None = None) -> torch.Tensor:
    """ALTI per layer: (L, B, n, n), rows summing to 1 over real tokens, padding rows and columns exactly 0."""
    out = []
    for acc, x, a_in, probs in zip(recorded.layers, recorded.residual, recorded.attn_input, recorded.probs):
        with torch.no_grad():
            t, bias = transformed_vectors(acc, x, a_in, probs)
            real = _mask(attention_mask, *t.shape[:2], t.device)
            pair = (real[:, :, None] & real[:, None, :])
            t = t * pair[..., None]
            y = (t.sum(dim=2) + bias)[:, :, None]  # (B, n, 1, d): the real block output, bias included as in
            # mt-upc/transformer-contributions (its `resultant`)
            c = (y.abs().sum(-1) - (y - t).abs().sum(-1)).clamp(min=0) * pair
            out.append(c / c.sum(dim=-1, keepdim=True).clamp(min=torch.finfo(c.dtype).tiny))
    return torch.stack(out)
