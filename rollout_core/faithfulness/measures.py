"""What the evaluation measures: the method names and measure columns, one input (`Item`), and the measures of
one importance vector on it (perturbation AUCs, ground truth, agreement with the references).

Measures (arrows: which direction is better):
  deletion_auc v, insertion_auc ^ (probability of the predicted class, 0..1),
  positive_auc v, negative_auc ^ (Chefer et al. accuracy AUC x 100 over 0..0.9),
  pointing_game ^, mass_share ^, iou ^ (ground truth), spearman_gxi ^, spearman_ig ^ (agreement).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Sequence

import numpy as np
import torch

from rollout_core import methods as method_registry
from rollout_core.explanation import Explanation
from rollout_core.faithfulness import ground_truth
from rollout_core.faithfulness.perturbation import FULL_GRID, CurveSet
from rollout_core.inputs.continuous import PreparedInput
from rollout_core.maths.ranks import spearman

AGREEMENT = {s.agreement: s.name for s in method_registry.all_methods() if s.agreement}
"""Agreement reference (its measure is spearman_<key>) -> the attention-free method computed for it."""
REFERENCES = tuple(AGREEMENT.values())
"""Attention-free methods measured only when asked (default method lists leave them out); the agreement measures
compare every method with them."""
METHODS = tuple(m for m in method_registry.names() if m not in REFERENCES)
DEFAULT_REFERENCES = {"text": ("gxi", "ig"), "image": ("gxi",)}
"""A data set's references unless others are asked for (the recorded tables). Images leave out integrated
gradients: its 32 gradient passes cost about 40 explanations of an image, more than everything else together."""
INPUT_REFERENCES: tuple[str, ...] = ()
"""One input's references unless asked for: none. On a sentence gradient x input and integrated gradients cost
about 10 explanations (benchmarks/RESULTS.md), as much as the rest of its evaluation."""
INPUT_GRID = {"text": FULL_GRID, "image": "quarters"}
"""One input's perturbation grid unless another is asked for (`perturbation.GRIDS`). An image's perturbed inputs
cost about half an explanation each: the full grid's 18 per ordering made one image about 40 explanations' worth,
fifths' 8 about 21, quarters' 6 bring it under 20 with the random row kept. A sentence's rows are cheap, so text
keeps the full grid. Data sets (and the recorded tables) always use `FULL_GRID` unless asked."""
RANDOM = "random"
RANDOM_SEEDS = 1
"""Random orderings per input. One is enough for a data set (the random row is a mean over its examples, each with
its own ordering); on a single input more seeds make the chance line steadier (`seeds=`, `--seeds`)."""
MEASURES = ("deletion_auc", "insertion_auc", "positive_auc", "negative_auc", "pointing_game", "mass_share", "iou",
            "spearman_gxi", "spearman_ig")
BETTER = {"deletion_auc": "lower", "insertion_auc": "higher", "positive_auc": "lower", "negative_auc": "higher",
          "pointing_game": "higher", "mass_share": "higher", "iou": "higher", "spearman_gxi": "higher",
          "spearman_ig": "higher"}

StepProgress = Callable[[int, int, str], None]
"""progress(done, total, what) on one input, in milliseconds of work: done = the time the finished steps took, total =
done + the estimate of the rest (from this run's first explanation and its first scored pass; exact for the scoring
once its first pass is done), so the time left is total - done; total is 0 until the first explanation and scored
pass are timed."""


@dataclass
class Item:
    """One input with its label (None: the prediction is the reference) and ground truth when known."""

    input: Any  # text (str) or image (path, bytes, PIL image, array)
    label: str | None = None
    evidence: list[tuple[int, int]] | None = None  # text: deciding character spans
    mask: np.ndarray | None = None  # image: (H, W) bool deciding pixels


def measures(prepared: PreparedInput, importance: torch.Tensor, curves: CurveSet, region: np.ndarray | None,
             references: dict[str, torch.Tensor]) -> dict[str, float]:
    """Every measure of one importance vector whose curves are `curves` (NaN where region / reference is missing)."""
    shown = prepared.removable.cpu().numpy()
    scores = importance.cpu().numpy()
    out = {f"{name}_auc": curves.auc[name] for name in curves.auc}
    nan = float("nan")
    out["pointing_game"] = nan if region is None else ground_truth.pointing_game(scores, region, shown)
    out["mass_share"] = nan if region is None else ground_truth.mass_share(scores, region, shown)
    out["iou"] = nan if region is None else ground_truth.iou_at_mass(scores, region, shown)
    for key, name in AGREEMENT.items():
        out[f"spearman_{key}"] = nan if name not in references else spearman(scores[shown],
                                                                             references[name].cpu().numpy()[shown])
    return out


def not_computed(references: Sequence[str], methods: Sequence[str]) -> tuple[str, ...]:
    """The agreement measures left empty: their reference was neither asked for nor evaluated as a method."""
    return tuple(f"spearman_{name}" for name, method in AGREEMENT.items()
                 if name not in references and method not in methods)


def region(explanation: Explanation, item: Item) -> np.ndarray | None:
    """The item's deciding region as a bool vector over the explanation's positions (None without ground truth)."""
    n = len(explanation.tokens)
    if item.evidence is not None and explanation.offsets is not None:
        return ground_truth.text_region(explanation.offsets, explanation.special, item.evidence)
    if item.mask is not None and explanation.grid is not None:
        return ground_truth.patch_region(item.mask, explanation.image.shape[:2], explanation.grid,
                                         explanation.patch_positions, n)
    return None
