"""Explanations against a known deciding region (the generated data sets record it).

A region is a (n,) bool vector over the model's positions. Text: a token is inside when its character
span overlaps an evidence span. Images: a patch is inside when at least `MIN_PATCH_SHARE` (50%) of its
pixels are in the shape's mask (after the mask is resized like the image, nearest neighbour), so a patch
counts only when the shape dominates it. Special positions are never inside and never scored.

Measures (over the shown positions; NaN when the region holds none of them, since there is nothing to find):
- pointing game: 1 if the single highest-scored position is inside (ties: the earliest), else 0;
- mass share: the share of the (non-negative part of the) scores that falls inside;
- IoU at a mass threshold: the smallest set of top positions holding >= `mass` of the scores, against the region.
"""
from __future__ import annotations

import numpy as np
import torch

MIN_PATCH_SHARE = 0.5
IOU_MASS = 0.5


def text_region(offsets: list[tuple[int, int]], special: np.ndarray, evidence: list[tuple[int, int]]) -> np.ndarray:
    """(n,) bool: tokens whose character span overlaps an evidence span (special tokens never)."""
    inside = np.zeros(len(offsets), dtype=bool)
    for i, (a, b) in enumerate(offsets):
        if not special[i] and b > a:
            inside[i] = any(a < end and start < b for start, end in evidence)
    return inside


def patch_region(mask: np.ndarray, size: tuple[int, int], grid: tuple[int, int], patch_positions: np.ndarray,
                 n: int) -> np.ndarray:
    """(n,) bool: patches with >= MIN_PATCH_SHARE of their pixels in `mask` (resized to `size` = (H, W))."""
    from PIL import Image

    height, width = size
    picture = Image.fromarray(np.asarray(mask, dtype=np.uint8) * 255)
    resized = np.asarray(picture.resize((width, height), Image.NEAREST)) > 0
    rows, cols = grid
    ph, pw = height // rows, width // cols
    share = resized[: rows * ph, : cols * pw].reshape(rows, ph, cols, pw).mean(axis=(1, 3)).reshape(-1)
    inside = np.zeros(n, dtype=bool)
    inside[np.asarray(patch_positions)] = share >= MIN_PATCH_SHARE
    return inside


def _shown(scores: np.ndarray, region: np.ndarray, shown: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    positions = np.flatnonzero(shown)
    return np.asarray(scores, dtype=np.float64)[positions], np.asarray(region, dtype=bool)[positions]


def pointing_game(scores: np.ndarray, region: np.ndarray, shown: np.ndarray) -> float:
    """1.0 if the top shown position (earliest on ties) is inside the region, 0.0 if not, NaN if no region."""
    values, inside = _shown(scores, region, shown)
    if not inside.any():
        return float("nan")
    return float(inside[int(np.argmax(values))])


def mass_share(scores: np.ndarray, region: np.ndarray, shown: np.ndarray) -> float:
    """Share of the non-negative score mass of the shown positions that lies inside the region."""
    values, inside = _shown(scores, region, shown)
    values = np.clip(values, 0.0, None)
    total = values.sum()
    if not inside.any() or total <= 0:
        return float("nan")
    return float(values[inside].sum() / total)


def iou_at_mass(scores: np.ndarray, region: np.ndarray, shown: np.ndarray, mass: float = IOU_MASS) -> float:
    """IoU of the region with the smallest top set holding >= `mass` of the non-negative score mass."""
    values, inside = _shown(scores, region, shown)
    values = np.clip(values, 0.0, None)
    total = values.sum()
    if not inside.any() or total <= 0:
        return float("nan")
    order = torch.sort(-torch.as_tensor(values), stable=True).indices.numpy()
    cumulative = np.cumsum(values[order]) / total
    count = int(np.searchsorted(cumulative, mass - 1e-12)) + 1
    chosen = np.zeros(len(values), dtype=bool)
    chosen[order[:count]] = True
    return float((chosen & inside).sum() / (chosen | inside).sum())
