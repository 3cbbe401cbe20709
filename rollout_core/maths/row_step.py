"""The residual step of rollout on a block of query rows: what `rollout.augment_layer` does to a whole layer,
for the rows start:start+k of it. Every part of that step except discarding is row-local, so a layer can be
augmented block by block as its attention is computed (the row-only streaming mode never holds n x n)."""
from __future__ import annotations

import torch


def clean_rows(fused_rows: torch.Tensor, real: torch.Tensor | None, first_row: int, dtype: torch.dtype, *,
               copy: bool = True) -> torch.Tensor:
    """A copy of (B, k, n) head-fused rows in `dtype`: NaN/Inf -> 0, negatives -> 0, padded rows and columns 0.
    `real` is the (B, n) float mask of real tokens (None: all real). `copy` False: in place when already in
    `dtype` (rows the caller owns)."""
    values = fused_rows.to(dtype=dtype, copy=copy).nan_to_num_(nan=0.0, posinf=0.0, neginf=0.0).clamp_(min=0.0)
    if real is not None:
        rows = real[:, first_row:first_row + values.shape[1]]
        values.mul_(rows[:, :, None]).mul_(real[:, None, :])
    return values


def residual_normalise_(
    values: torch.Tensor, first_row: int, residual_weight: float, real: torch.Tensor | None
) -> torch.Tensor:
    """In place on cleaned (B, k, n) rows start:start+k: add residual_weight on the diagonal (real tokens),
    row-normalise; a real row that sums to 0 becomes its identity row (never NaN or Inf)."""
    k = values.shape[1]
    rows_real = None if real is None else real[:, first_row:first_row + k]
    diagonal = values.diagonal(offset=first_row, dim1=-2, dim2=-1)
    diagonal.add_(float(residual_weight) if rows_real is None else float(residual_weight) * rows_real)
    row_sums = values.sum(dim=-1, keepdim=True)
    if rows_real is None and row_sums.numel() and float(row_sums.min()) > 0:  # the common case, one reduction
        return values.div_(row_sums.clamp_min(torch.finfo(values.dtype).tiny))
    empty = row_sums.squeeze(-1) <= 0
    if rows_real is not None:
        empty &= rows_real > 0
    if bool(empty.any()):  # keep the token itself rather than divide by zero
        values[empty] = 0.0
        diagonal.masked_fill_(empty, 1.0)
        row_sums = values.sum(dim=-1, keepdim=True)
    return values.div_(row_sums.clamp_min(torch.finfo(values.dtype).tiny))
