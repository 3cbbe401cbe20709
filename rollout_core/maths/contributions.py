"""Contribution measures computed from one recorded forward pass (see rollout_core.models.layer_access).

Norm-based (Kobayashi et al. 2020): C_ij = || sum_h alpha^h_ij f^h(x_j) ||, f^h(x) = (x W_V^h + b_V^h) W_O^h.
ALTI (Ferrando et al. 2022): y_i = sum_j T_i(x_j) (+ bias terms), c_ij = max(0, ||y_i||_1 - ||y_i - T_i(x_j)||_1),
rows normalised over the real tokens. Both return (L, B, n, n); padding rows and columns are exactly 0.

Neither builds the (B, n, n, d) tensor of all T_i(x_j) at once (on a 257-token, 12-layer DINOv2 that took
33 s on one thread): the norms come from each token's (H, H) Gram matrix of head vectors,
||sum_h a_h f_h||^2 = a^T G a, and ALTI's L1 distances are taken `ALTI_CHUNK` output rows at a time.
`transformed_vectors` is the explicit decomposition, kept as the reference the fast forms are tested against.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from rollout_core.cancel import checkpoint
from rollout_core.models.layer_access import LayerAccess, Recorded

ALTI_CHUNK = 32  # output rows per block of ALTI distances: (B, n, 32, d) floats at a time


def _head_values(acc: LayerAccess, x: torch.Tensor) -> torch.Tensor:
    """f^h(x_j) = (x_j W_V^h + b_V^h) W_O^h for every head and token: (B, H, n, d). x: attention input."""
    b, n, _ = x.shape
    h = acc.num_heads
    v = acc.value(x).view(b, n, h, -1)
    w_o = acc.output.weight.view(acc.output.weight.shape[0], h, -1)  # (d, H, dh)
    return torch.einsum("bjhe,dhe->bhjd", v, w_o)


def _mask(attention_mask: torch.Tensor | None, b: int, n: int, device: torch.device) -> torch.Tensor:
    if attention_mask is None:
        return torch.ones(b, n, dtype=torch.bool, device=device)
    return attention_mask.to(device).bool()


def _pairs(attention_mask: torch.Tensor | None, b: int, n: int, device: torch.device) -> torch.Tensor:
    real = _mask(attention_mask, b, n, device)
    return real[:, :, None] & real[:, None, :]


def norm_contributions(recorded: Recorded, attention_mask: torch.Tensor | None = None) -> torch.Tensor:
    """Raw norms ||sum_h alpha^h_ij f^h(x_j)|| per layer: (L, B, n, n), not normalised; padding exactly 0."""
    out = []
    for acc, x, probs in zip(recorded.layers, recorded.attn_input, recorded.probs):
        with torch.no_grad():
            f = _head_values(acc, x)
            gram = torch.einsum("bhjd,bgjd->bjhg", f, f)  # (B, n, H, H) per input token
            a = probs.to(f.dtype)
            squared = (a * torch.einsum("bgij,bjhg->bhij", a, gram)).sum(1)
            c = squared.clamp_min(0).sqrt()
        out.append(c * _pairs(attention_mask, c.shape[0], c.shape[1], c.device))
    return torch.stack(out)


@dataclass
class _Decomposition:
    """T_i(x_j) = scale_i * sum_h alpha^h_ij heads^h_j + [i = j] own_i; block output y_i = sum_j T_i(x_j) + bias_i."""

    heads: torch.Tensor  # (B, H, n, d)
    scale: torch.Tensor  # (B, n, d)
    own: torch.Tensor  # (B, n, d)
    bias: torch.Tensor  # (B, n, d)


def _decompose(acc: LayerAccess, x: torch.Tensor, attn_in: torch.Tensor, probs: torch.Tensor) -> _Decomposition:
    """Post-LN: LN(attn + x) linearised with the observed std (constant); pre-LN: x + scale * attn(LN1(x)),
    exact (LN1 acts on each token alone, so LN1(x_j) belongs to x_j)."""
    f = _head_values(acc, attn_in)
    b_o = acc.output.bias if acc.output.bias is not None else torch.zeros_like(x[0, 0])
    if not acc.post_ln:
        scale = acc.layer_scale if acc.layer_scale is not None else torch.ones_like(b_o)
        return _Decomposition(f, scale.expand_as(x), x, (b_o * scale).expand_as(x))
    mixed = torch.einsum("bhij,bhjd->bid", probs.to(f.dtype), f)
    pre = mixed + x + b_o  # the LN's actual input
    std = (pre.var(dim=-1, unbiased=False, keepdim=True) + acc.norm.eps).sqrt()  # (B, n, 1)
    scale = acc.norm.weight / std
    centred = f - f.mean(dim=-1, keepdim=True)
    own = scale * (x - x.mean(dim=-1, keepdim=True))
    return _Decomposition(centred, scale, own, scale * (b_o - b_o.mean()) + acc.norm.bias)


def transformed_vectors(acc: LayerAccess, x: torch.Tensor, attn_in: torch.Tensor,
                        probs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(T, bias): T[b, i, j] = T_i(x_j) (B, n, n, d) and the per-output bias (B, n, d), sum_j T_i(x_j) + bias
    being the attention block's output (the explicit form of what alti_contributions computes by blocks)."""
    d = _decompose(acc, x, attn_in, probs)
    t = d.scale[:, :, None, :] * torch.einsum("bhij,bhjd->bijd", probs.to(d.heads.dtype), d.heads)
    eye = torch.eye(x.shape[1], dtype=t.dtype, device=t.device)
    return t + eye[None, :, :, None] * d.own[:, :, None, :], d.bias


def _alti_layer(acc: LayerAccess, x: torch.Tensor, attn_in: torch.Tensor, probs: torch.Tensor,
                pairs: torch.Tensor) -> torch.Tensor:
    """One layer's unnormalised ALTI contributions (B, n, n), `ALTI_CHUNK` output rows at a time."""
    d = _decompose(acc, x, attn_in, probs)
    a = probs.to(d.heads.dtype) * pairs[:, None]
    y = d.scale * torch.einsum("bhij,bhjd->bid", a, d.heads) + d.own + d.bias  # (B, n, d)
    batch, heads, n, dim = d.heads.shape
    # both bmm operands made contiguous: with B = 1 the reshapes are views whose batch stride is 1, a layout on which
    # bmm is many times slower (benchmarks/bench_alti_blocks.py)
    by_input = d.heads.permute(0, 2, 1, 3).reshape(batch * n, heads, dim).contiguous()  # (B n, H, d)
    # c_ij = ||y_i||_1 - ||y_i - T_i(x_j)||_1 is a small difference of two large sums: taken in float64 (in float32
    # it moved default-image's per-layer maps by 5.5e-5 against a float64 run of the model)
    wide = torch.promote_types(y.dtype, torch.float64)
    y_wide = y.to(wide)
    out = torch.empty(batch, n, n, dtype=wide, device=y.device)
    for start in range(0, n, ALTI_CHUNK):
        rows = slice(start, min(start + ALTI_CHUNK, n))
        size = rows.stop - start
        mix = a[:, :, rows].permute(0, 3, 2, 1).reshape(batch * n, size, heads).contiguous()  # (B n, c, H)
        t = torch.bmm(mix, by_input).view(batch, n, size, dim)  # t[b, j, i] = T_i(x_j) without residual
        t.mul_(d.scale[:, None, rows])
        own = t[:, rows].diagonal(dim1=1, dim2=2).transpose(1, 2) + d.own[:, rows]  # T_i(x_i) + residual (B, c, d)
        t = t.to(wide)
        far = torch.sub(y_wide[:, None, rows], t, out=t).abs_().sum(-1).transpose(1, 2)  # (B, c, n)
        far[:, :, rows].diagonal(dim1=1, dim2=2).copy_((y_wide[:, rows] - own.to(wide)).abs().sum(-1))
        out[:, rows] = y_wide[:, rows].abs().sum(-1, keepdim=True) - far
    return out.clamp_min(0) * pairs


def alti_contributions(recorded: Recorded, attention_mask: torch.Tensor | None = None) -> torch.Tensor:
    """ALTI per layer: (L, B, n, n) in float64, rows summing to 1 over real tokens, padding rows and columns exactly
    0. The block output y includes the bias terms, as mt-upc/transformer-contributions' `resultant` does."""
    out = []
    for acc, x, a_in, probs in zip(recorded.layers, recorded.residual, recorded.attn_input, recorded.probs):
        checkpoint()  # a stopped page session stops between layers (rollout_core.cancel)
        with torch.no_grad():
            c = _alti_layer(acc, x, a_in, probs, _pairs(attention_mask, x.shape[0], x.shape[1], x.device))
        out.append(c / c.sum(dim=-1, keepdim=True).clamp(min=torch.finfo(c.dtype).tiny))
    return torch.stack(out)
