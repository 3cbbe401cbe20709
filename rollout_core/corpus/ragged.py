"""Per-row rank correlation and top-k overlap over ragged rows, vectorised (one numpy pass for many rows).

A batch of rows is given flat: `row[i]` says which row unit i belongs to, units of a row in their display order.
The figures equal `rollout_core.compare.spearman` / `top_k_overlap` applied row by row (tests check both), without
a Python call per row: comparing two runs of 100k rows calls them 100k times otherwise.
"""
from __future__ import annotations

import numpy as np


def _average_ranks(row: np.ndarray, values: np.ndarray) -> np.ndarray:
    """1-based ranks of `values` within each row, ties given their average rank (scipy's `rankdata` per row)."""
    order = np.lexsort((values, row))
    r, v = row[order], values[order]
    n = len(order)
    first_of_row = np.ones(n, dtype=bool)
    first_of_row[1:] = r[1:] != r[:-1]
    row_start = np.maximum.accumulate(np.where(first_of_row, np.arange(n), 0))
    position = np.arange(n) - row_start
    new_group = first_of_row.copy()
    new_group[1:] |= v[1:] != v[:-1]
    group = np.cumsum(new_group) - 1
    group_first = position[new_group]
    group_last = np.empty_like(group_first)
    group_last[group] = position  # the last write to each group is its last member
    ranks = np.empty(n, dtype=np.float64)
    ranks[order] = (group_first[group] + group_last[group]) / 2.0 + 1.0
    return ranks


def spearman_rows(row: np.ndarray, a: np.ndarray, b: np.ndarray, rows: int) -> np.ndarray:
    """Spearman's rho of `a` against `b` within each of `rows` rows (NaN for a row of fewer than two units or
    with one side constant, as `compare.spearman`)."""
    row = np.asarray(row, dtype=np.int64)
    if row.size == 0:
        return np.full(rows, np.nan)
    ra = _average_ranks(row, np.asarray(a, dtype=np.float64))
    rb = _average_ranks(row, np.asarray(b, dtype=np.float64))
    count = np.bincount(row, minlength=rows).astype(np.float64)
    safe = np.maximum(count, 1.0)
    da = ra - (np.bincount(row, ra, rows) / safe)[row]
    db = rb - (np.bincount(row, rb, rows) / safe)[row]
    cov = np.bincount(row, da * db, rows)
    var_a, var_b = np.bincount(row, da * da, rows), np.bincount(row, db * db, rows)
    tiny = 1e-12 * np.maximum(count, 1.0) ** 3  # rank variances are multiples of 1/12: below this they are 0
    defined = (count >= 2) & (var_a > tiny) & (var_b > tiny)
    out = np.full(rows, np.nan)
    out[defined] = np.clip(cov[defined] / np.sqrt(var_a[defined] * var_b[defined]), -1.0, 1.0)
    return out


def top_k_rows(row: np.ndarray, values: np.ndarray, k: int) -> np.ndarray:
    """Whether each unit is among the k highest of its row (ties: the earlier unit first, as a stable sort)."""
    row = np.asarray(row, dtype=np.int64)
    n = len(row)
    order = np.lexsort((np.arange(n), -np.asarray(values, dtype=np.float64), row))
    r = row[order]
    first_of_row = np.ones(n, dtype=bool)
    first_of_row[1:] = r[1:] != r[:-1]
    row_start = np.maximum.accumulate(np.where(first_of_row, np.arange(n), 0))
    top = np.empty(n, dtype=bool)
    top[order] = (np.arange(n) - row_start) < k
    return top


def top_k_overlap_rows(row: np.ndarray, a: np.ndarray, b: np.ndarray, k: int, rows: int) -> np.ndarray:
    """|top-k(a) ∩ top-k(b)| / k per row, k cut to the row's unit count (NaN for an empty row), as
    `compare.top_k_overlap`."""
    row = np.asarray(row, dtype=np.int64)
    count = np.bincount(row, minlength=rows)
    both = top_k_rows(row, a, k) & top_k_rows(row, b, k)
    shared = np.bincount(row, both.astype(np.float64), rows)
    kept = np.minimum(count, k)
    out = np.full(rows, np.nan)
    out[kept > 0] = shared[kept > 0] / kept[kept > 0]
    return out
