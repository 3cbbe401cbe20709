"""Deletion/insertion curves and the Chefer et al. (CVPR 2021) perturbation protocol.

Everything here is model-free: a *scorer* maps keep masks (S, n) bool (True = position left as it is,
False = replaced by the baseline) to class probabilities (S, C). The model side lives in `scoring`.

- Positions are ordered by importance, most important first; ties are broken by position (earlier
  first), so the same scores always give the same curve. Only `removable` positions are ever
  perturbed: special tokens ([CLS], [SEP], registers) are always kept.
- Deletion: remove the top fraction f of the removable positions, f on the grid (`GRIDS`: tenths 0, 0.1, ..., 1,
  the full protocol; fifths 0, 0.2, ..., 1; quarters 0, 0.25, ..., 1), and track the probability of the
  target class (the originally predicted one); lower area = more faithful.
- Insertion: start from everything removed and put the top fraction f back; higher area = better.
- Chefer protocol: positive perturbation (remove most important first) and negative perturbation
  (least important first) at the grid's fractions up to 0.9 (tenths: 0 (unperturbed), 0.1, ..., 0.9; fifths:
  0, 0.2, ..., 0.8; quarters: 0, 0.25, 0.5, 0.75); the metric is accuracy w.r.t. the
  label (the original prediction when there is none); AUC by the trapezoid rule over f, x 100.
  Positive: lower is better; negative: higher is better. Averaged over a data set, the mean of the
  per-example AUCs equals the AUC of the mean accuracy curve (the AUC is linear), as in the paper.

All perturbed inputs of one input (every ordering) go to the scorer in one call (duplicates removed), so the
model adapter can run them as one batch.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Sequence

import torch

from rollout_core.errors import InputError

Scorer = Callable[[torch.Tensor], torch.Tensor]
"""keep (S, n) bool -> class probabilities (S, C)."""

CURVES = ("deletion", "insertion", "positive", "negative")
CHEFER_END = 0.9
"""The Chefer curves stop at this fraction removed (the paper's 0..0.9)."""


@dataclass(frozen=True)
class Grid:
    """The fractions the curves are read at: deletion / insertion at 0, 1/steps, ..., 1, positive / negative
    (Chefer) at those up to `CHEFER_END`. Each ordering adds 2 * (steps - 1) distinct perturbed inputs (the negative
    curve's masks are insertion's, the positive's deletion's)."""

    name: str  # "tenths", "fifths", "quarters": the word the API, the CLI and the page use
    steps: int

    @property
    def curve(self) -> tuple[float, ...]:
        """Deletion / insertion fractions: 0 .. 1."""
        return tuple(round(i / self.steps, 6) for i in range(self.steps + 1))

    @property
    def chefer(self) -> tuple[float, ...]:
        """Positive / negative perturbation fractions: 0 (unperturbed) .. at most `CHEFER_END`."""
        return tuple(f for f in self.curve if f <= CHEFER_END)

    @property
    def rows(self) -> int:
        """Distinct perturbed inputs an ordering usually adds (the inner deletion and insertion fractions)."""
        return 2 * (self.steps - 1)

    def words(self) -> str:
        """'tenths (0, 0.1, …, 1; Chefer's to 0.9)': the grid in words (the page, the CLI's report)."""
        return (f"{self.name} ({self.curve[0]:g}, {self.curve[1]:g}, …, {self.curve[-1]:g}; "
                f"Chefer's to {self.chefer[-1]:g})")


GRIDS = {g.name: g for g in (Grid("tenths", 10), Grid("fifths", 5), Grid("quarters", 4))}
"""The grids a caller can ask for, by name."""
FULL_GRID = "tenths"
"""The full protocol: data sets and the recorded tables always use it, so their figures stay comparable."""


def named_grid(name: str) -> Grid:
    """The grid called `name`; `InputError` naming the choices otherwise."""
    if not isinstance(name, str) or name not in GRIDS:
        raise InputError(f"unknown grid {name!r}; choose one of: {', '.join(GRIDS)}")
    return GRIDS[name]


@dataclass
class CurveSet:
    """The four curves of one ordering on one input, and their areas."""

    fractions: dict[str, list[float]]  # curve -> fraction axis
    values: dict[str, list[float]]  # curve -> probability (deletion/insertion) or accuracy 0/1 (positive/negative)
    auc: dict[str, float]  # deletion/insertion: area in probability units (0..1); positive/negative: x 100


def trapezoid_auc(fractions: torch.Tensor | list[float], values: torch.Tensor | list[float]) -> float:
    """Area under the piecewise-linear curve through (fractions[i], values[i]) (trapezoid rule)."""
    x = torch.as_tensor(fractions, dtype=torch.float64)
    y = torch.as_tensor(values, dtype=torch.float64)
    if x.shape != y.shape or x.dim() != 1:
        raise ValueError("fractions and values must be 1-D and of the same length")
    return float(((x[1:] - x[:-1]) * (y[1:] + y[:-1]) / 2).sum())


def importance_order(importance: torch.Tensor, removable: torch.Tensor) -> torch.Tensor:
    """Indices of the removable positions, most important first; equal scores in position order."""
    importance = torch.as_tensor(importance).detach().to("cpu", torch.float64)
    candidates = torch.nonzero(torch.as_tensor(removable).to("cpu", torch.bool)).flatten()
    order = torch.sort(-importance[candidates], stable=True).indices
    return candidates[order]


def keep_masks(order: torch.Tensor, n: int, fractions: list[float] | tuple[float, ...], *,
               insert: bool) -> torch.Tensor:
    """(len(fractions), n) keep masks along `order` (removable positions, first = acted on first).

    insert=False: the first round(f * m) positions of `order` are removed (m = len(order));
    insert=True: only those are kept among the removable positions (the rest are removed).
    Positions not in `order` are always kept.
    """
    m = len(order)
    masks = torch.ones(len(fractions), n, dtype=torch.bool)
    for row, f in enumerate(fractions):
        k = int(round(f * m))
        if insert:
            masks[row, order[k:]] = False
        else:
            masks[row, order[:k]] = False
    return masks


def perturbation_curves(
    scorer: Scorer,
    importance: torch.Tensor,
    removable: torch.Tensor,
    *,
    target: int,
    label: int | None = None,
    grid: Grid = GRIDS[FULL_GRID],
) -> CurveSet:
    """Deletion, insertion, positive and negative perturbation curves of one importance vector.

    `target`: the class whose probability deletion/insertion track (the originally predicted one).
    `label`: the true class for the accuracy curves; None = the original prediction (single inputs).
    `grid`: the fractions the curves are read at (default the full protocol's tenths).
    """
    return perturbation_curves_many(scorer, [importance], removable, target=target, label=label, grid=grid)[0]


def perturbation_curves_many(
    scorer: Scorer,
    importances: Sequence[torch.Tensor],
    removable: torch.Tensor,
    *,
    target: int,
    label: int | None = None,
    progress: Callable[[int, int], None] | None = None,
    chunk: int = 32,
    grid: Grid = GRIDS[FULL_GRID],
) -> list[CurveSet]:
    """`perturbation_curves` of several importance vectors of one input, on `grid`. The distinct perturbed inputs go
    to the scorer in one call, or with `progress` in calls of `chunk` rows, each followed by progress(scored,
    total)."""
    removable = torch.as_tensor(removable).to("cpu", torch.bool)
    n = removable.shape[0]
    plans = []
    for importance in importances:
        order = importance_order(importance, removable)
        plans.append({
            "deletion": keep_masks(order, n, grid.curve, insert=False),
            "insertion": keep_masks(order, n, grid.curve, insert=True),
            "positive": keep_masks(order, n, grid.chefer, insert=False),
            "negative": keep_masks(order.flip(0), n, grid.chefer, insert=False),
        })
    stacked = torch.cat([m for plan in plans for m in plan.values()])
    unique, inverse = torch.unique(stacked, dim=0, return_inverse=True)
    probs = _score(scorer, unique, progress, chunk)[inverse]
    reference = int(probs[0].argmax()) if label is None else int(label)  # row 0: deletion at f = 0, the input
    out, start = [], 0
    for plan in plans:
        fractions: dict[str, list[float]] = {}
        values: dict[str, list[float]] = {}
        auc: dict[str, float] = {}
        for name, masks in plan.items():
            rows = probs[start : start + len(masks)]
            start += len(masks)
            if name in ("deletion", "insertion"):
                axis, curve = grid.curve, rows[:, target]
                area = trapezoid_auc(axis, curve)
            else:
                axis, curve = grid.chefer, (rows.argmax(-1) == reference).to(torch.float64)
                area = 100.0 * trapezoid_auc(axis, curve)
            fractions[name] = list(axis)
            values[name] = curve.tolist()
            auc[name] = area
        out.append(CurveSet(fractions, values, auc))
    return out


def _score(scorer: Scorer, masks: torch.Tensor, progress: Callable[[int, int], None] | None,
           chunk: int) -> torch.Tensor:
    """scorer(masks) as float64 on the CPU, in one call, or in chunks reporting progress(scored, total)."""
    if progress is None:
        return torch.as_tensor(scorer(masks)).detach().to("cpu", torch.float64)
    total, parts = len(masks), []
    for start in range(0, total, max(1, int(chunk))):
        parts.append(torch.as_tensor(scorer(masks[start : start + chunk])).detach().to("cpu", torch.float64))
        progress(min(start + chunk, total), total)
    return torch.cat(parts)
