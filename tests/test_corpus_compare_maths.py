"""The numerics behind `corpus compare`: ragged rank correlation and top-k overlap against the one-row functions of
`rollout_core.compare`, and the row-keyed Poisson bootstrap weights against Poisson(1)."""
from __future__ import annotations

import math

import numpy as np
import pytest

from rollout_core import compare
from rollout_core.corpus import ragged
from rollout_core.corpus.bootstrap import FIXED, interval, poisson_weights, row_keys, to_fixed


def _ragged(seed: int, rows: int = 300) -> tuple[np.ndarray, np.ndarray, np.ndarray, list[slice]]:
    """Rows of 0-12 units with many ties (small integers) and some constant rows."""
    rng = np.random.default_rng(seed)
    lengths = rng.integers(0, 13, rows)
    row = np.repeat(np.arange(rows), lengths)
    a = rng.integers(0, 4, len(row)).astype(float)
    b = np.where(rng.random(len(row)) < 0.5, a + rng.integers(0, 2, len(row)), rng.integers(0, 4, len(row)))
    b[row % 17 == 0] = 1.0  # constant rows: undefined
    bounds = np.concatenate([[0], np.cumsum(lengths)])
    return row, a, b.astype(float), [slice(bounds[i], bounds[i + 1]) for i in range(rows)]


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_ragged_spearman_equals_compare_spearman_row_by_row(seed: int) -> None:
    row, a, b, slices = _ragged(seed)
    got = ragged.spearman_rows(row, a, b, len(slices))
    for i, s in enumerate(slices):
        want, _ = compare.spearman(a[s], b[s])
        if math.isnan(want):
            assert math.isnan(got[i]), i
        else:
            assert got[i] == pytest.approx(want, abs=1e-12), i


def test_ragged_spearman_hand_case() -> None:
    # row 0: a = 1 2 3, b = 3 2 1 -> -1; row 1: a = 1 1 2 (ranks 1.5 1.5 3), b = 1 2 3 -> 0.866...
    row = np.array([0, 0, 0, 1, 1, 1])
    got = ragged.spearman_rows(row, np.array([1, 2, 3, 1, 1, 2.0]), np.array([3, 2, 1, 1, 2, 3.0]), 3)
    assert got[0] == pytest.approx(-1.0) and got[1] == pytest.approx(math.sqrt(3) / 2) and math.isnan(got[2])


@pytest.mark.parametrize("k", [1, 3, 5])
def test_ragged_top_k_overlap_equals_compare_top_k_overlap(k: int) -> None:
    row, a, b, slices = _ragged(7)
    got = ragged.top_k_overlap_rows(row, a, b, k, len(slices))
    for i, s in enumerate(slices):
        want = compare.top_k_overlap(a[s], b[s], k)
        assert (math.isnan(got[i]) and math.isnan(want)) or got[i] == pytest.approx(want), i


def test_poisson_weights_follow_poisson_one() -> None:
    weights = poisson_weights(row_keys(str(i) for i in range(4000)), 100, seed=3).ravel()
    assert weights.mean() == pytest.approx(1.0, abs=0.01) and weights.var() == pytest.approx(1.0, abs=0.02)
    for k in range(5):
        assert (weights == k).mean() == pytest.approx(math.exp(-1) / math.factorial(k), abs=0.004), k


def test_poisson_weights_belong_to_the_row_not_to_its_place() -> None:
    ids = [f"row-{i}" for i in range(50)]
    weights = poisson_weights(row_keys(ids), 200, seed=0)
    order = np.random.default_rng(0).permutation(50)
    shuffled = poisson_weights(row_keys([ids[i] for i in order]), 200, seed=0)
    assert np.array_equal(shuffled, weights[order])
    assert np.array_equal(poisson_weights(row_keys(ids[:10]), 200, seed=0), weights[:10])
    other_seed = poisson_weights(row_keys(ids), 200, seed=1)
    assert (other_seed != weights).mean() > 0.4
    replicate_corr = np.corrcoef(weights.T)[np.triu_indices(200, 1)]
    assert abs(replicate_corr.mean()) < 0.01  # replicates do not repeat each other


def test_fixed_point_sums_do_not_depend_on_the_order() -> None:
    values = np.random.default_rng(1).random(10_000) / 7
    fixed = to_fixed(values)
    assert fixed.sum() == fixed[::-1].sum() == sum(int(v) for v in fixed[np.random.default_rng(2).permutation(10_000)])
    assert fixed.sum() / FIXED == pytest.approx(values.sum(), abs=10_000 / FIXED)


def test_interval_leaves_out_replicates_without_rows() -> None:
    low, high = interval(np.array([1.0, 2.0, 3.0, 99.0]), np.array([1, 1, 1, 0]), level=0.5)
    assert (low, high) == pytest.approx((1.5, 2.5))
    assert all(math.isnan(v) for v in interval(np.array([1.0]), np.array([0])))
