"""Fusing attention heads into one matrix per layer."""
from __future__ import annotations

import torch

from rollout_core.errors import InputError
from rollout_core.options import HEAD_FUSIONS  # defined there, torch-free, so the CLI can offer it before torch


def fuse_heads(attention: torch.Tensor, how: str = "mean") -> torch.Tensor:
    """(..., H, n, n) -> (..., n, n): mean (the rollout paper), max or min over the head axis."""
    if attention.dim() < 3:
        raise InputError(f"attention must be (..., heads, n, n), got shape {tuple(attention.shape)}")
    if how == "mean":
        return attention.mean(dim=-3)
    if how == "max":
        return attention.amax(dim=-3)
    if how == "min":
        return attention.amin(dim=-3)
    raise InputError(f"unknown head fusion {how!r}: choose one of {', '.join(HEAD_FUSIONS)}")
