"""Balanced draws from labelled (text, target) rows, shared by the human-labelled corpora readers."""
from __future__ import annotations

import random


def balanced(rows: list[tuple[str, float]], n: int, rng: random.Random,
             neutral_share: float) -> list[tuple[str, float]]:
    """`n` rows: `neutral_share` of target 0.5, the rest half 1.0 and half 0.0 (fewer if a class runs out),
    shuffled."""
    by_target = {t: [r for r in rows if r[1] == t] for t in (1.0, 0.0, 0.5)}
    for group in by_target.values():
        rng.shuffle(group)
    n_neutral = round(n * neutral_share)
    half = (n - n_neutral) // 2
    picked = by_target[1.0][:half] + by_target[0.0][:half] + by_target[0.5][:n_neutral]
    rng.shuffle(picked)
    return picked
