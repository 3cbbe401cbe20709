"""A streaming Poisson bootstrap whose draws belong to the rows, not to the order they are read in.

Each row gets, per replicate, a weight drawn from Poisson(1) (the large-sample limit of how often a row appears
in a resample of n rows). The draw is a pure function of (seed, row key, replicate): a counter-based generator
(SplitMix64 over the row's 64-bit key) feeds the inverse of Poisson(1)'s distribution function. So rows can be
read in any chunks, in any order, in any process or on Ray, and every replicate sums the same weighted rows:
memory holds the replicates' sums, never the rows. Sums are kept in fixed point (int64, FIXED units per 1.0):
integer addition does not depend on the order of the terms, so the figures are identical however the work was
split, to the bit.
"""
from __future__ import annotations

import hashlib
import math
from typing import Iterable

import numpy as np

FIXED = float(2 ** 32)
"""Fixed-point units per 1.0: a share is kept to 2.3e-10; sums of 10^8 weighted shares still fit in int64."""

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_MIX_1 = np.uint64(0xBF58476D1CE4E5B9)
_MIX_2 = np.uint64(0x94D049BB133111EB)
_POISSON_CDF = np.cumsum([math.exp(-1.0) / math.factorial(k) for k in range(25)])
"""P(X <= k) for X ~ Poisson(1), k = 0..24 (1 - P(X <= 24) is below 1e-25: beyond a double's resolution)."""


def row_keys(ids: Iterable[str]) -> np.ndarray:
    """A 64-bit key per row id (BLAKE2b): the row's identity for the bootstrap and for matching runs."""
    return np.array([int.from_bytes(hashlib.blake2b(str(i).encode("utf-8"), digest_size=8).digest(), "little")
                     for i in ids], dtype=np.uint64)


def _splitmix(x: np.ndarray) -> np.ndarray:
    """SplitMix64's output function (Steele, Lea and Flood 2014) on uint64 arrays: a bijective 64-bit mix."""
    x = x ^ (x >> np.uint64(30))
    x = x * _MIX_1
    x = x ^ (x >> np.uint64(27))
    x = x * _MIX_2
    return x ^ (x >> np.uint64(31))


def poisson_weights(keys: np.ndarray, replicates: int, seed: int = 0) -> np.ndarray:
    """(rows, replicates) int64 Poisson(1) weights, a function of each row's key, the seed and the replicate."""
    keys = np.asarray(keys, dtype=np.uint64)
    base = _splitmix(keys ^ _splitmix(np.array([seed], dtype=np.uint64) * _GOLDEN + _GOLDEN))
    with np.errstate(over="ignore"):
        counters = base[:, None] + (np.arange(1, replicates + 1, dtype=np.uint64) * _GOLDEN)[None, :]
        bits = _splitmix(counters)
    uniform = (bits >> np.uint64(11)).astype(np.float64) * (1.0 / 2 ** 53)
    return np.searchsorted(_POISSON_CDF, uniform, side="right").astype(np.int64)


def to_fixed(values: np.ndarray) -> np.ndarray:
    """Values as int64 fixed point (FIXED units per 1.0)."""
    return np.rint(np.asarray(values, dtype=np.float64) * FIXED).astype(np.int64)


def interval(numerators: np.ndarray, denominators: np.ndarray, level: float = 0.95) -> tuple[float, float]:
    """The percentile interval of the replicates' ratios numerator / denominator (replicates whose denominator is 0,
    i.e. that drew none of the rows, are left out); NaNs when fewer than two replicates remain."""
    keep = np.asarray(denominators) > 0
    if keep.sum() < 2:
        return float("nan"), float("nan")
    ratios = np.asarray(numerators, dtype=np.float64)[keep] / np.asarray(denominators, dtype=np.float64)[keep]
    low, high = np.quantile(ratios, [(1 - level) / 2, 1 - (1 - level) / 2])
    return float(low), float(high)
