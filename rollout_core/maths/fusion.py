"""Fusing attention heads into one matrix per layer."""
from __future__ import annotations

import torch

from rollout_core.errors import InputError
from rollout_core.options import HEAD_FUSIONS  # defined there, torch-free, so the CLI can offer it before torch


def fuse_heads(attention: torch.Tensor, how: str = "mean", *, keepdim: bool = False) -> torch.Tensor:
    """(..., H, n, n) -> (..., n, n) (`keepdim`: (..., 1, n, n)): mean (the rollout paper), max or min over the head
    axis. One head is returned as it is (a view: every fusion of one head is that head), so fusing already fused
    attention (capture.fused_heads) costs nothing; callers must not write into the result."""
    if attention.dim() < 3:
        raise InputError(f"attention must be (..., heads, n, n), got shape {tuple(attention.shape)}")
    if how in HEAD_FUSIONS and attention.shape[-3] == 1:
        return attention if keepdim else attention.squeeze(-3)
    if how == "mean" and attention.dtype in (torch.float32, torch.float64):
        return attention.sum(dim=-3, keepdim=keepdim).div_(attention.shape[-3])  # torch's mean in these dtypes
    if how == "mean":
        return attention.mean(dim=-3, keepdim=keepdim)
    if how == "max":
        return attention.amax(dim=-3, keepdim=keepdim)
    if how == "min":
        return attention.amin(dim=-3, keepdim=keepdim)
    raise InputError(f"unknown head fusion {how!r}: choose one of {', '.join(HEAD_FUSIONS)}")
