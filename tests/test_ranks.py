"""Spearman's rho without scipy (rollout_core.maths.ranks): equal to scipy's on random data with ties (scipy only as
the reference here), a hand-computed case, and NaN exactly where the correlation is undefined."""
from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from scipy.stats import rankdata, spearmanr

from rollout_core.maths.ranks import average_ranks, spearman


def test_equal_to_scipy_on_random_data_with_ties():
    rng = np.random.default_rng(0)
    for _ in range(300):
        n = int(rng.integers(2, 80))
        a = rng.integers(0, 6, n).astype(float)  # many ties
        b = rng.normal(size=n) if rng.random() < 0.5 else np.round(rng.normal(size=n), 1)
        ours, theirs = spearman(a, b), spearmanr(a, b).statistic
        assert (math.isnan(ours) and math.isnan(theirs)) or abs(ours - theirs) < 1e-12, (a, b)
        np.testing.assert_array_equal(average_ranks(torch.from_numpy(a)).numpy(), rankdata(a))


def test_a_hand_computed_case_and_its_inputs():
    # a = [10, 20, 20, 30] ranks [1, 2.5, 2.5, 4]; b = [1, 3, 2, 4] ranks [1, 3, 2, 4]
    # centred: [-1.5, 0, 0, 1.5] and [-1.5, 0.5, -0.5, 1.5]: 4.5 / sqrt(4.5 * 5) = 0.9486833
    assert average_ranks(torch.tensor([10.0, 20.0, 20.0, 30.0])).tolist() == [1.0, 2.5, 2.5, 4.0]
    expected = 4.5 / math.sqrt(4.5 * 5.0)
    for a, b in (([10, 20, 20, 30], [1, 3, 2, 4]), (np.array([10, 20, 20, 30.0], dtype=np.float32),
                                                    torch.tensor([1, 3, 2, 4]))):
        assert spearman(a, b) == pytest.approx(expected, abs=1e-12)
    assert spearman([1, 2, 3], [30, 20, 10]) == -1.0


def test_undefined_cases_are_nan_and_shapes_must_agree():
    assert math.isnan(spearman([1.0], [2.0]))
    assert math.isnan(spearman([1, 1, 1], [1, 2, 3]))
    assert math.isnan(spearman([1, 2, float("nan")], [1, 2, 3]))
    with pytest.raises(ValueError):
        spearman([1, 2, 3], [1, 2])
