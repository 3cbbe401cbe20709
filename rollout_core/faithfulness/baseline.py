"""Is the deletion baseline a real removal? Deleting every position must take the predicted class down to about
chance, or the deletion curves of every method end where they started and cannot tell the methods apart.

`checked_baseline` tries the modality's baselines in order (`scoring.BASELINES`: [MASK], padding, unknown token;
mean colour, blur, noise) on this input: the first whose all-removed input leaves the predicted class at most
`NEAR_CHANCE` above chance (1 / classes) is used; when none does, the one that moves it most, with a note. One row per
baseline tried (a forward of the all-removed input), reused by the curves. `separation_note` says when the curves of
every method (and random) end up within `SEPARATION` of each other.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import torch

from rollout_core.inputs.continuous import BASELINE_WORDS, PreparedInput

NEAR_CHANCE = 0.15
"""How far above chance the predicted class may stay once everything is removed (binary: at most 65%)."""
SEPARATION = 0.05
"""Deletion and insertion areas (probability units) all this close: the curves cannot separate the methods."""


@dataclass(frozen=True)
class BaselineCheck:
    """The baseline used and what removing everything with it (and with those tried before it) did."""

    name: str  # one of scoring.BASELINES
    removed: float  # the predicted class's probability with every position removed
    chance: float  # 1 / number of classes
    tried: tuple[tuple[str, float], ...]  # (baseline, that probability) in the order tried, the used one included

    @property
    def passed(self) -> bool:
        return self.removed <= self.chance + NEAR_CHANCE

    def words(self, label: str) -> str:
        """'[MASK] token: deleting everything leaves POSITIVE at 46% (chance 50%)'."""
        return (f"{BASELINE_WORDS.get(self.name, self.name)}: deleting everything leaves {label} at "
                f"{self.removed:.0%} (chance {self.chance:.0%})")

    def note(self, label: str) -> str | None:
        """What the reader must know: the default baseline did not move the prediction (and which one is used
        instead), or none did; None when the first baseline passed."""
        first, first_p = self.tried[0]
        if self.passed and len(self.tried) == 1:
            return None
        before = (f"Deleting everything with {BASELINE_WORDS.get(first, first)} leaves {label} at {first_p:.0%} "
                  f"(chance {self.chance:.0%}), so its deletion curves could not fall")
        if self.passed:
            return f"{before}; removed positions become {BASELINE_WORDS.get(self.name, self.name)} instead " \
                   f"({self.removed:.0%} with everything removed)."
        tried = ", ".join(f"{BASELINE_WORDS.get(n, n)} {p:.0%}" for n, p in self.tried)
        return (f"No removal moves {label} near chance on this input ({tried}): the curves use "
                f"{BASELINE_WORDS.get(self.name, self.name)}, and deletion cannot separate the methods here.")


def checked_baseline(prepare: Callable[[str], PreparedInput], names: tuple[str, ...], target: int,
                     first: tuple[PreparedInput, torch.Tensor]) -> tuple[PreparedInput, BaselineCheck, torch.Tensor]:
    """The input prepared with the first of `names` whose all-removed input is near chance for class `target`
    (else the lowest), its check, and that all-removed input's probabilities (1, C) for the curves to reuse.
    `first`: the input prepared with names[0] and its all-removed probabilities, already scored."""
    tried: list[tuple[str, float]] = []
    best: tuple[PreparedInput, torch.Tensor] | None = None
    for name in names:
        if name == names[0]:
            prepared, probs = first
        else:
            prepared = prepare(name)
            probs = prepared.probabilities(torch.zeros(1, prepared.n, dtype=torch.bool))
        removed = float(probs[0, target])
        tried.append((name, removed))
        if best is None or removed < float(best[1][0, target]):
            best = (prepared, probs)
        chance = 1.0 / probs.shape[-1]
        if removed <= chance + NEAR_CHANCE:
            return prepared, BaselineCheck(name, removed, chance, tuple(tried)), probs
    assert best is not None
    prepared, probs = best
    return prepared, BaselineCheck(prepared.baseline_name, float(probs[0, target]), 1.0 / probs.shape[-1],
                                   tuple(tried)), probs


def separation_note(table_deletion: dict[str, float], table_insertion: dict[str, float]) -> str | None:
    """A note when every method's (and random's) deletion areas lie within `SEPARATION` of each other, and so do
    the insertion areas: on this input the curves cannot tell the methods apart."""
    spread = [max(v.values()) - min(v.values()) for v in (table_deletion, table_insertion) if v]
    if not spread or max(spread) >= SEPARATION:
        return None
    return (f"Every method's deletion and insertion areas, random's included, lie within {max(spread):.3f} of each "
            "other: removing positions hardly moves the prediction here, so these curves cannot tell the methods "
            "apart on this input (try another input, or look at the other measures).")
