"""One input evaluated: explain it with each method, compute the asked references, score every ordering's perturbed
inputs and collect each method's measures and mean curves (the random row: the mean over its seeds)."""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
import torch

from rollout_core import methods as registry
from rollout_core.errors import InputError, RolloutError
from rollout_core.explanation import Explanation
from rollout_core.faithfulness.baseline import BaselineCheck, checked_baseline
from rollout_core.faithfulness.measures import (
    AGREEMENT,
    MEASURES,
    RANDOM,
    REFERENCES,
    Item,
    StepProgress,
    measures,
    region,
)
from rollout_core.faithfulness.perturbation import (
    FULL_GRID,
    GRIDS,
    CurveSet,
    Grid,
    perturbation_curves_many,
)
from rollout_core.inputs.continuous import BASELINES, PreparedInput, prepare_image, prepare_text
from rollout_core.models.handle import ModelHandle


SHORT_PASS_SHARE, FULL_PASS_TOKENS = 0.3, 128
"""Time estimate: a scored row in a full pass costs SHORT_PASS_SHARE of a row timed in a pass of two on a short
input, rising with its positions to all of it at FULL_PASS_TOKENS (compute, not the pass's fixed cost)."""
PROGRESS_PASSES, MIN_PASS_ROWS = 8, 16
"""With a progress callback the scoring runs in about this many passes of at least that many rows (a Stop is seen
between passes); without, in as few as the memory budget allows."""


@dataclass
class ItemResult:
    """One item's rows (one per method and the random baseline), long-form curves and prediction."""

    rows: list[dict[str, Any]]
    curves: pd.DataFrame
    predicted: str
    probability: float
    explanations: dict[str, Explanation]
    scored: int = 0  # distinct perturbed inputs scored
    passes: int = 0  # forward passes that scored them
    baseline: BaselineCheck | None = None  # the deletion baseline used and what removing everything did


class _Work:
    """Progress in milliseconds of work: done = the time the finished steps took, total = done + the estimate of the
    rest, from this run's own measured explanation and scored row (so a time left read off it is that estimate), 0
    before there is one."""

    def __init__(self, report: StepProgress) -> None:
        self.report, self.start = report, time.perf_counter()

    def elapsed(self) -> float:
        return time.perf_counter() - self.start

    def __call__(self, what: str, remaining: float | None) -> None:
        done = int(1000 * self.elapsed())
        self.report(done, 0 if remaining is None else done + max(0, int(1000 * remaining)), what)


def evaluate_item(handle: ModelHandle, item: Item, methods: list[str], seeds: int,
                  options: dict[str, Any], index: int = 0, references: tuple[str, ...] = tuple(AGREEMENT),
                  progress: StepProgress | None = None, batch_size: int | None = None,
                  explanations: dict[str, Explanation] | None = None, baseline: str | None = None,
                  grid: Grid = GRIDS[FULL_GRID]) -> ItemResult:
    """All measures of one item; `index` picks its own random orderings (seeds index * seeds ...).
    `references`: the agreement references computed ("gxi", "ig"; a reference evaluated as a method is computed
    anyway). `batch_size`: perturbed inputs per forward pass (None: as many as the memory budget allows; 1: one per
    forward on the model as loaded). `explanations`: methods' explanations of this input already made with the same
    `options` (the page's own), used instead of explaining again. `baseline`: what removed positions become (one of
    `scoring.BASELINES`); None: the first of them that moves the prediction near chance (`checked_baseline`).
    `grid`: the fractions the curves are read at (`perturbation.GRIDS`)."""
    from rollout_core.explain import explain_methods

    if batch_size is not None and (isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1):
        raise InputError(f"batch_size must be a positive integer, not {batch_size!r}")
    text = handle.modality == "text"
    names = BASELINES[handle.modality]

    def prepare(name: str) -> PreparedInput:
        return (prepare_text if text else prepare_image)(handle, item.input, batch_size=batch_size, baseline=name)

    prepared = prepare(names[0] if baseline is None else baseline)
    labels = handle.labels or []
    label = None if item.label is None else labels.index(item.label)
    explained = [m for m in methods if m not in REFERENCES]
    given = {m: e for m, e in (explanations or {}).items() if m in explained}
    wanted = {AGREEMENT[r] for r in references} | {m for m in methods if m in REFERENCES}
    to_explain = [m for m in explained if m not in given] or ([] if explained else ["attention"])
    work = _Work(progress or (lambda done, total, what: None))
    rows_guess = (len(methods) + seeds) * grid.rows + 2  # the scoring's size before the orderings are known
    references_run = [registry.get(m) for m in REFERENCES if m in wanted]
    # each pass of a reference: about a forward and a backward, 3 scored rows' worth
    gradient_rows = 3 * sum(spec.passes for spec in references_run)
    made: dict[str, Explanation] = {}
    # the explanations' forward pass gives the prediction (their target: the predicted class) for every curve;
    # methods with the same forward pass share it (`explain_methods`)
    target = _target(next(iter(given.values())), prepared) if given else None
    if target is None:
        work(f"explaining with {', '.join(to_explain)}", None)
        made = explain_methods(handle, item.input, to_explain, **options)
        target = _target(made[to_explain[0]], prepared)
    per_explanation = work.elapsed() if made else None
    # the unperturbed input's probabilities: its explanation's forward pass gave them; the all-removed input's (and
    # the unperturbed one's when no explanation has them) scored first in one pass: the baseline's check, the time a
    # scored row takes, and the curves' end points (f = 0 and 1), not scored again
    work("checking the deletion baseline", None)
    known = _unperturbed(next(iter(given.values())) if given else made[to_explain[0]], prepared)
    since = work.elapsed()
    ends = prepared.probabilities(torch.stack(([] if known is not None else [torch.ones(prepared.n, dtype=torch.bool)])
                                              + [torch.zeros(prepared.n, dtype=torch.bool)]))
    # a row of a full pass costs about a row of this pass on long inputs and less on a sentence, whose pass is
    # mostly fixed cost (SHORT_PASS_SHARE)
    per_row = max((work.elapsed() - since) / len(ends) * min(1.0, max(SHORT_PASS_SHARE, prepared.n / FULL_PASS_TOKENS)),
                  1e-4)
    kept, removed_probs = (ends[:1] if known is None else known.to(ends.dtype)), ends[-1:]
    if baseline is None:
        prepared, check, removed_probs = checked_baseline(prepare, names, target, first=(prepared, removed_probs))
    else:
        removed = float(removed_probs[0, target])
        check = BaselineCheck(baseline, removed, 1.0 / ends.shape[-1], ((baseline, removed),))
    guess = per_row
    left = [m for m in to_explain if m not in made]
    costs = _explanation_seconds(handle, item.input, [*made, *left], options) if left else {}
    # the methods' own cost estimates (registry), scaled by how long the first one really took
    scale = per_explanation / costs[to_explain[0]] if per_explanation and costs.get(to_explain[0]) else 1.0
    if left:
        rest = sum(costs[k] * scale if k in costs else (per_explanation or 3 * guess) for k in left)
        work(f"explaining with {', '.join(left)}", rest + (rows_guess + gradient_rows) * guess)
        made.update(explain_methods(handle, item.input, left, target=target, **options))
    first = next(iter(given.values())) if given else made[to_explain[0]]
    explanations = {m: given.get(m, made.get(m)) for m in explained}
    where = region(first, item)
    computed: dict[str, torch.Tensor] = {}
    for i, spec in enumerate(references_run):
        rest = 3 * sum(later.passes for later in references_run[i:])
        work(spec.title, (rest + rows_guess) * guess)
        start = work.elapsed()
        steps = None if progress is None else (lambda k, s=spec, t=start: work(
            f"{s.title}, step {k}", (work.elapsed() - t) / k * (s.passes - k) + rows_guess * guess))
        computed[spec.name] = spec.attribute(prepared, target, steps)
    importances: dict[str, list[torch.Tensor]] = {
        m: [computed[m] if m in REFERENCES else torch.as_tensor(explanations[m].scores)] for m in methods}
    importances[RANDOM] = [torch.rand(prepared.n, generator=torch.Generator().manual_seed(index * seeds + s),
                                      dtype=torch.float64) for s in range(seeds)]
    flat = [(method, v) for method, vectors in importances.items() for v in vectors]
    work("scoring the perturbed inputs", rows_guess * guess)
    scoring_start = work.elapsed()
    scored = None if progress is None else (lambda k, n: work(
        f"scoring the perturbed inputs ({k}/{n})", (work.elapsed() - scoring_start) / max(k, 1) * (n - k)))
    calls: list[int] = []
    removable = prepared.removable.to("cpu", torch.bool)

    def scorer(keep: torch.Tensor) -> torch.Tensor:
        shown = keep & removable
        ends_at = {0: shown.eq(removable).all(dim=1), 1: ~shown.any(dim=1)}  # all kept, all removed: scored above
        fresh = ~(ends_at[0] | ends_at[1])
        out = torch.empty(len(keep), kept.shape[-1], dtype=kept.dtype)
        out[ends_at[0]], out[ends_at[1]] = kept[0], removed_probs[0]
        if fresh.any():
            calls.append(int(fresh.sum()))
            out[fresh] = prepared.probabilities(keep[fresh]).to(kept.dtype)
        return out

    chunk = prepared.batch_size if progress is None else min(prepared.batch_size, max(
        MIN_PASS_ROWS, -(-rows_guess // PROGRESS_PASSES)))
    curve_sets = perturbation_curves_many(scorer, [v for _, v in flat], prepared.removable,
                                          target=target, label=label, progress=scored, chunk=chunk, grid=grid)
    measured: dict[str, list[tuple[dict[str, float], CurveSet]]] = {}
    for (method, vector), curve_set in zip(flat, curve_sets):
        measured.setdefault(method, []).append((measures(prepared, vector, curve_set, where, computed), curve_set))
    rows, curves = [], []
    for method, results in measured.items():
        rows.append({"method": method, **{k: float(np.mean([m[k] for m, _ in results])) for k in MEASURES}})
        first_set = results[0][1]
        for name, fractions in first_set.fractions.items():
            values = np.mean([c.values[name] for _, c in results], axis=0)
            curves.extend({"method": method, "curve": name, "fraction": f, "value": float(v)}
                          for f, v in zip(fractions, values))
    probability = float(kept[0, target])
    # the end points: one pass of the all-removed row (and the unperturbed one when it was scored), then one
    # all-removed row per other baseline tried
    passes = sum(-(-count // chunk) for count in calls) + len(check.tried)
    return ItemResult(rows, pd.DataFrame(curves), labels[target], probability, explanations,
                      sum(calls) + (known is None) + len(check.tried), passes, check)


def _explanation_seconds(handle: ModelHandle, source: Any, methods: list[str], options: dict[str, Any]
                         ) -> dict[str, float]:
    """Each method's estimated seconds on this input (`serving.budget`, the registry's cost model); {} when the
    input cannot be sized (the explanation itself then says why)."""
    from rollout_core.serving import budget

    try:
        sized = budget.positions(handle, source)
        return {m: budget.estimate_seconds(m, budget.workload(
            handle, source, m, options.get("start_layer", 0), options.get("end_layer"),
            full_matrix=bool(options.get("full_matrix", False)), sized=sized)) for m in methods}
    except (RolloutError, ValueError, TypeError):
        return {}


def _unperturbed(explanation: Explanation, prepared: PreparedInput) -> torch.Tensor | None:
    """(1, C) the unperturbed input's class probabilities as the scorer computes them (a softmax of the logits),
    from the logits of the explanation's own forward pass of it; None when it has none (or saw other positions)."""
    logits = explanation.logits
    if logits is None or len(explanation.tokens) != prepared.n:
        return None
    return torch.softmax(torch.as_tensor(logits, dtype=torch.float32), dim=-1)[None]


def _target(explanation: Explanation, prepared: PreparedInput) -> int:
    """The predicted class: from the explanation's own forward pass (a calibration temperature does not change which
    class is on top), else from one forward of the unperturbed input."""
    if explanation.prediction:
        return int(explanation.prediction[0].index)
    return int(prepared.probabilities(torch.ones(1, prepared.n, dtype=torch.bool))[0].argmax())
