"""One input evaluated: explain it with each method, compute the asked references, score every ordering's perturbed
inputs and collect each method's measures and mean curves (the random row: the mean over its seeds)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
import torch

from rollout_core import methods as registry
from rollout_core.errors import InputError
from rollout_core.explanation import Explanation
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
    CHEFER_FRACTIONS,
    CURVE_FRACTIONS,
    CurveSet,
    perturbation_curves_many,
)
from rollout_core.inputs.continuous import PreparedInput, prepare_image, prepare_text
from rollout_core.models.handle import ModelHandle


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


def evaluate_item(handle: ModelHandle, item: Item, methods: list[str], seeds: int,
                  options: dict[str, Any], index: int = 0, references: tuple[str, ...] = tuple(AGREEMENT),
                  progress: StepProgress | None = None, batch_size: int | None = None,
                  explanations: dict[str, Explanation] | None = None) -> ItemResult:
    """All measures of one item; `index` picks its own random orderings (seeds index * seeds ...).
    `references`: the agreement references computed ("gxi", "ig"; a reference evaluated as a method is computed
    anyway). `batch_size`: perturbed inputs per forward pass (None: as many as the memory budget allows; 1: one per
    forward on the model as loaded). `explanations`: methods' explanations of this input already made with the same
    `options` (the page's own), used instead of explaining again."""
    from rollout_core.explain import explain_image, explain_text

    if batch_size is not None and (isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1):
        raise InputError(f"batch_size must be a positive integer, not {batch_size!r}")
    text = handle.modality == "text"
    prepare = prepare_text if text else prepare_image
    prepared = prepare(handle, item.input, batch_size=batch_size)
    labels = handle.labels or []
    label = None if item.label is None else labels.index(item.label)
    explain = explain_text if text else explain_image
    explained = [m for m in methods if m not in REFERENCES]
    given = {m: e for m, e in (explanations or {}).items() if m in explained}
    wanted = {AGREEMENT[r] for r in references} | {m for m in methods if m in REFERENCES}
    bound = (len(methods) + seeds) * sum(len(f) for f in (CURVE_FRACTIONS, CURVE_FRACTIONS, CHEFER_FRACTIONS,
                                                             CHEFER_FRACTIONS))
    to_explain = [m for m in explained if m not in given] or ([] if explained else ["attention"])
    references_run = [registry.get(m) for m in REFERENCES if m in wanted]
    before = len(to_explain) + sum(spec.passes for spec in references_run)
    report = progress or (lambda done, total, what: None)
    made: dict[str, Explanation] = {}
    # the first explanation's forward pass gives the prediction (its target: the predicted class) for every curve
    target = _target(next(iter(given.values())), prepared) if given else None
    for done, m in enumerate(to_explain):
        report(done, before + bound, f"explaining with {m}")
        made[m] = explain(handle, item.input, method=m, **options, **({} if target is None else {"target": target}))
        target = _target(made[m], prepared) if target is None else target
    first = next(iter(given.values())) if given else made[to_explain[0]]
    explanations = {m: given.get(m, made.get(m)) for m in explained}
    done = len(to_explain)
    where = region(first, item)
    computed: dict[str, torch.Tensor] = {}
    for spec in references_run:
        report(done, before + bound, spec.title)
        steps = None if progress is None else (lambda k, d=done, t=spec.title: report(d + k, before + bound,
                                                                                    f"{t}, step {k}"))
        computed[spec.name] = spec.attribute(prepared, target, steps)
        done += spec.passes
    importances: dict[str, list[torch.Tensor]] = {
        m: [computed[m] if m in REFERENCES else torch.as_tensor(explanations[m].scores)] for m in methods}
    importances[RANDOM] = [torch.rand(prepared.n, generator=torch.Generator().manual_seed(index * seeds + s),
                                      dtype=torch.float64) for s in range(seeds)]
    flat = [(method, v) for method, vectors in importances.items() for v in vectors]
    report(before, before + bound, "scoring the perturbed inputs")
    scored = None if progress is None else (lambda k, n: report(before + k, before + n,
                                                                 f"scoring the perturbed inputs ({k}/{n})"))
    calls: list[int] = []

    def scorer(keep: torch.Tensor) -> torch.Tensor:
        calls.append(len(keep))
        return prepared.probabilities(keep)

    curve_sets = perturbation_curves_many(scorer, [v for _, v in flat], prepared.removable,
                                          target=target, label=label, progress=scored,
                                          chunk=prepared.batch_size)
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
    probability = curve_sets[0].values["deletion"][0]  # the unperturbed input (f = 0), scored with the others
    passes = sum(-(-count // prepared.batch_size) for count in calls)
    return ItemResult(rows, pd.DataFrame(curves), labels[target], probability, explanations, sum(calls), passes)


def _target(explanation: Explanation, prepared: PreparedInput) -> int:
    """The predicted class: from the explanation's own forward pass (a calibration temperature does not change which
    class is on top), else from one forward of the unperturbed input."""
    if explanation.prediction:
        return int(explanation.prediction[0].index)
    return int(prepared.probabilities(torch.ones(1, prepared.n, dtype=torch.bool))[0].argmax())
