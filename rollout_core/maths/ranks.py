"""Spearman rank correlation: Pearson correlation of average ranks (tied values share the mean of their ranks)."""
from __future__ import annotations

import math

import torch


def average_ranks(values: torch.Tensor) -> torch.Tensor:
    """(n,) float64 ranks 1..n of a 1-D tensor; each group of equal values gets the mean of the ranks it spans."""
    x = torch.as_tensor(values, dtype=torch.float64).reshape(-1)
    sorted_values, order = torch.sort(x, stable=True)
    n = x.numel()
    # group starts in sorted order; every member of a group [start, end) gets (start + 1 + end) / 2
    new_group = torch.ones(n, dtype=torch.bool, device=x.device)
    new_group[1:] = sorted_values[1:] != sorted_values[:-1]
    group = torch.cumsum(new_group.long(), 0) - 1
    starts = torch.nonzero(new_group).reshape(-1)
    ends = torch.cat([starts[1:], torch.tensor([n], device=x.device)])
    mean_rank = (starts + 1 + ends).to(torch.float64) / 2
    ranks = torch.empty(n, dtype=torch.float64, device=x.device)
    ranks[order] = mean_rank[group]
    return ranks


def spearman(a, b) -> float:
    """Spearman's rho of two equally long 1-D sequences (array, tensor or list); NaN when there are fewer than two
    values, a value is NaN, or either side is constant (the correlation is undefined there)."""
    xa = torch.as_tensor(a, dtype=torch.float64).reshape(-1)
    xb = torch.as_tensor(b, dtype=torch.float64).reshape(-1)
    if xa.shape != xb.shape:
        raise ValueError(f"cannot correlate {tuple(xa.shape)} with {tuple(xb.shape)} values")
    if xa.numel() < 2 or bool(torch.isnan(xa).any() or torch.isnan(xb).any()):
        return math.nan
    ra, rb = average_ranks(xa), average_ranks(xb)
    da, db = ra - ra.mean(), rb - rb.mean()
    denominator = torch.sqrt((da * da).sum() * (db * db).sum())
    if float(denominator) == 0.0:
        return math.nan
    return float(((da * db).sum() / denominator).clamp(-1.0, 1.0))
