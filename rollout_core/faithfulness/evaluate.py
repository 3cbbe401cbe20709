"""Faithfulness of every method on one input (`evaluate_input`) or a data set (`evaluate_dataset`).

For each input: explain it with each method, prepare it once (`scoring`), then for every importance
vector (the method's scores over the non-special positions) compute the four perturbation curves, the
ground-truth measures when the input has a known deciding region, and the rank agreement with the
attention-free references asked for (`references`: "gxi" gradient x input, "ig" integrated gradients; by default
both on text and gradient x input alone on images, where integrated gradients cost about 40 explanations; a
reference not computed leaves its spearman column NaN, listed in `not_computed`). The `random` row is the mean over
`seeds` random orderings per input (default 1: over a data set it is still a mean over every example's own
ordering), so every number can be read against chance. The curves are read on a grid of fractions (`GRIDS`): a data
set on the full protocol's tenths (`FULL_GRID`, the recorded tables'), one input on its modality's `INPUT_GRID`
(text tenths, images quarters: a third of the perturbed inputs), unless `grid=` asks for another. The references
themselves can be added as methods ("grad_x_input", "integrated_gradients") to see what an attention-free method scores.

Parts: `measures` (names, columns, one vector's measures), `item` (one input), `datasets` (models,
methods, data sets). Measures (arrows: which direction is better):
  deletion_auc v, insertion_auc ^ (probability of the predicted class, 0..1),
  positive_auc v, negative_auc ^ (Chefer et al. accuracy AUC x 100 over 0..0.9),
  pointing_game ^, mass_share ^, iou ^ (ground truth), spearman_gxi ^, spearman_ig ^ (agreement).
"""
from __future__ import annotations

import functools
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np
import pandas as pd

from rollout_core.errors import InputError
from rollout_core.explanation import Explanation
from rollout_core.faithfulness.datasets import (
    GENERATED_SIZE,
    IMAGE_SUFFIXES,
    check_methods,
    check_references,
    dataset_items,
    load_handle,
    parse_label,
)
from rollout_core.faithfulness.baseline import BaselineCheck, separation_note
from rollout_core.faithfulness.item import ItemResult, evaluate_item
from rollout_core.faithfulness.measures import (
    AGREEMENT,
    BETTER,
    DEFAULT_REFERENCES,
    INPUT_GRID,
    INPUT_REFERENCES,
    MEASURES,
    METHODS,
    RANDOM,
    RANDOM_SEEDS,
    REFERENCES,
    Item,
    StepProgress,
    not_computed,
)
from rollout_core.faithfulness.perturbation import FULL_GRID, GRIDS, named_grid
from rollout_core.inputs.continuous import BASELINES
from rollout_core.models.handle import ModelHandle
from rollout_core.serving.workers import map_items

__all__ = ["AGREEMENT", "BASELINES", "BETTER", "DEFAULT_REFERENCES", "FULL_GRID", "GENERATED_SIZE", "GRIDS",
           "IMAGE_SUFFIXES", "INPUT_GRID", "INPUT_REFERENCES", "MEASURES", "METHODS",
           "NOT_COMPUTED", "RANDOM", "RANDOM_SEEDS", "REFERENCES", "DatasetEvaluation", "InputEvaluation", "Item",
           "Progress", "StepProgress", "evaluate_dataset", "evaluate_input", "item_rows", "markdown_table", "summarize"]

NOT_COMPUTED = "not computed"
"""What a table shows for a measure whose reference was not asked for (never a number)."""

Progress = Callable[[int, int], None]
"""progress(done, total): called with 0 once the data set is read, then after each example."""


@dataclass
class InputEvaluation:
    """Curves and measures of every method (and the random baseline) on one input."""

    curves: pd.DataFrame  # long: method, curve ("deletion", "insertion", "positive", "negative"), fraction, value
    table: pd.DataFrame  # index method, columns MEASURES
    predicted: str  # the originally predicted label (the target of every curve)
    probability: float  # its probability on the unperturbed input
    explanations: dict[str, Explanation] = field(default_factory=dict)
    not_computed: tuple[str, ...] = ()  # measures whose reference was not asked for (NaN in `table`)
    references: tuple[str, ...] = ()  # the agreement references computed ("gxi", "ig")
    seeds: int = RANDOM_SEEDS  # random orderings behind the random row
    grid: str = FULL_GRID  # the fractions the curves were read at (`GRIDS`)
    scored: int = 0  # distinct perturbed inputs scored (every method's and ordering's, shared ones once)
    passes: int = 0  # forward passes that scored them
    baseline: BaselineCheck | None = None  # what removed positions became, and what removing everything did
    notes: tuple[str, ...] = ()  # what the reader must know: a baseline that did not move the prediction, no separation


@dataclass
class DatasetEvaluation:
    """Per-example measures and the method x measure summary (mean and std over examples)."""

    per_example: pd.DataFrame  # example, method, label, predicted, correct, MEASURES...
    summary: pd.DataFrame  # index method, columns (measure, "mean" | "std")
    accuracy: float  # of the model on the unperturbed examples
    count: int
    not_computed: tuple[str, ...] = ()  # measures whose reference was not asked for (NaN in the frames)
    grid: str = FULL_GRID  # the fractions the curves were read at (`GRIDS`)

    def markdown(self) -> str:
        return markdown_table(self.summary, not_computed=self.not_computed)


# ----------------------------------------------------------------------------------------------
# Public API


def evaluate_input(
    model: str | os.PathLike[str] | ModelHandle | None,
    input: Any,
    methods: Sequence[str] | None = None,
    *,
    label: str | None = None,
    evidence: list[tuple[int, int]] | None = None,
    mask: np.ndarray | None = None,
    seeds: int = RANDOM_SEEDS,
    references: Sequence[str] | None = None,
    progress: StepProgress | None = None,
    batch_size: int | None = None,
    explanations: dict[str, Explanation] | None = None,
    baseline: str | None = None,
    grid: str | None = None,
    **options: Any,
) -> InputEvaluation:
    """Every method's curves and measures on one text or image (the handle's modality decides which).

    `label`: the true class for the accuracy curves (default: the original prediction); `evidence`
    (text) / `mask` (image): the deciding region for the ground-truth measures (NaN without). `references`: the
    agreement references to compute ("gxi", "ig"; None or (): none, `INPUT_REFERENCES`: on one input they run only
    when asked, while a data set's tables keep `DEFAULT_REFERENCES`). `seeds`: random orderings (the chance row).
    `options` go to explain_text / explain_image (head_fusion, residual_weight, start_layer, ...).
    `progress` is told how far the work is (`StepProgress`). `batch_size`: perturbed inputs per forward pass (None:
    every perturbation of every method in as few passes as the memory budget allows; 1: one per forward on the
    model as loaded, the unbatched reference path; same numbers within 1e-6). `explanations`: methods'
    explanations of this input made with the same `options` (e.g. the page's own), not made again. `baseline`:
    what a removed position becomes (`BASELINES` of the modality); None: the first of them with which removing
    everything takes the prediction near chance (`InputEvaluation.baseline` says which, `notes` why). `grid`: the
    fractions the curves are read at, a name of `GRIDS` ("tenths": the full protocol of the data sets and the
    recorded tables; "fifths", "quarters": fewer perturbed inputs); None: the modality's `INPUT_GRID` (text tenths,
    images quarters).
    """
    handle = load_handle(model)
    grid = INPUT_GRID[handle.modality] if grid is None else named_grid(grid).name
    label = None if label is None else parse_label(label, handle.labels or [], "label")
    methods = check_methods(methods, handle.modality, handle)
    references = check_references(references, handle.modality, INPUT_REFERENCES)
    result = evaluate_item(handle, Item(input, label, evidence, mask), methods, seeds, options,
                           references=references, progress=progress, batch_size=batch_size,
                           explanations=explanations, baseline=baseline, grid=GRIDS[grid])
    table = pd.DataFrame([{k: r[k] for k in ("method", *MEASURES)} for r in result.rows]).set_index("method")
    return InputEvaluation(curves=result.curves, table=table, predicted=result.predicted,
                           probability=result.probability, explanations=result.explanations,
                           not_computed=not_computed(references, methods), references=references, seeds=seeds,
                           grid=grid, scored=result.scored, passes=result.passes, baseline=result.baseline,
                           notes=_notes(result, table))


def evaluate_dataset(
    model: str | os.PathLike[str] | ModelHandle | None,
    dataset: str | os.PathLike[str],
    methods: Sequence[str] | None = None,
    *,
    limit: int | None = None,
    progress: Progress | None = None,
    seeds: int = RANDOM_SEEDS,
    agreement: bool = True,
    references: Sequence[str] | None = None,
    engine: str = "local",
    workers: int = 2,
    batch_size: int | None = None,
    collect: list[dict[str, Any]] | None = None,
    data_seed: int = 0,
    grid: str = FULL_GRID,
    **options: Any,
) -> DatasetEvaluation:
    """Measures over a data set: "text" / "image" (the generated test sets, with ground truth), a CSV
    file with `text` and `label` columns, or a folder with one sub-folder of images per class.
    `references`: as for `evaluate_input`; `agreement=False` skips them all (spearman columns NaN) unless they are
    asked for as methods.
    `engine="local"`: the examples spread over `workers` threads of one torch thread each (whole examples per
    core; 1: this thread with torch's own thread count); `engine="ray"`: over `workers` Ray actors (each loads
    the model once); same rows (`rollout_core.serving.workers.map_items`, either way one example at a time, with
    `progress` after each and a stop, `rollout_core.cancel`, seen between them). `batch_size`: as for
    `evaluate_input`. `collect`: a list each example's rows are appended to as it finishes, so a caller whose run
    is stopped keeps what was done (`summarize` them).
    `data_seed`: another draw of a generated set (0: the one the recorded tables use). `grid`: as for
    `evaluate_input`, but the full protocol's `FULL_GRID` by default (the recorded tables')."""
    generated = dataset if dataset in ("text", "image") else None
    modality = generated or ("image" if Path(dataset).is_dir() else "text")
    handle = load_handle(model, modality, check=generated is not None)
    methods = check_methods(methods, handle.modality, handle)
    references = check_references(references, handle.modality) if agreement else ()
    grid = named_grid(grid).name
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 1):
        raise InputError(f"limit must be a positive integer, not {limit!r}")
    if isinstance(data_seed, bool) or not isinstance(data_seed, int) or data_seed < 0:
        raise InputError(f"data_seed must be a whole number >= 0, not {data_seed!r}")
    items = dataset_items(handle, dataset, limit, data_seed)
    rows = [] if collect is None else collect
    worker_model = handle if engine == "local" else str(model if isinstance(model, (str, os.PathLike)) else handle.name)
    make = functools.partial(_example_evaluator, worker_model, methods, seeds, options, references, batch_size, grid)
    with map_items(make, list(enumerate(items)), engine=engine, workers=workers) as results:
        if progress is not None:
            progress(0, len(items))
        for done, part in enumerate(results, start=1):
            rows.extend(part)  # a stopped run keeps the examples reported before the stop, no later one
            if progress is not None:
                progress(done, len(items))
    return summarize(rows, methods, len(items), not_computed(references, methods), grid)


def _example_evaluator(model: ModelHandle | str, methods: list[str], seeds: int, options: dict[str, Any],
                       references: tuple[str, ...], batch_size: int | None,
                       grid: str) -> Callable[[tuple[int, Item]], list[dict]]:
    """A worker's function: `item_rows` of one (index, example) with `model` (a handle, or a name a Ray actor
    loads once)."""
    handle = load_handle(model)
    return lambda job: item_rows(handle, job[0], job[1], methods, seeds, options, references, batch_size, grid)


def item_rows(handle: ModelHandle, index: int, item: Item, methods: list[str], seeds: int, options: dict[str, Any],
              references: tuple[str, ...], batch_size: int | None = None,
              grid: str = FULL_GRID) -> list[dict[str, Any]]:
    """The per-example rows (one per method and the random baseline) of data-set example `index`."""
    result = evaluate_item(handle, item, methods, seeds, options, index, references=references,
                           batch_size=batch_size, baseline=BASELINES[handle.modality][0], grid=GRIDS[grid])
    return [{"example": index, "label": item.label, "predicted": result.predicted,
             "correct": item.label == result.predicted, **row} for row in result.rows]


def _notes(result: ItemResult, table: pd.DataFrame) -> tuple[str, ...]:
    """The baseline's note (it did not move the prediction near chance) and the curves' (they do not separate)."""
    notes = [result.baseline.note(result.predicted)] if result.baseline is not None else []
    notes.append(separation_note(table["deletion_auc"].to_dict(), table["insertion_auc"].to_dict()))
    return tuple(n for n in notes if n)


def summarize(rows: list[dict[str, Any]], methods: Sequence[str], count: int,
              not_computed: tuple[str, ...] = (), grid: str = FULL_GRID) -> DatasetEvaluation:
    """The method x measure summary (mean and std over examples) of per-example rows, in `methods` order
    (`not_computed`: the measures whose reference was not asked for; `grid`: the one the rows were read on)."""
    per_example = pd.DataFrame(rows).sort_values(["example"], kind="stable").reset_index(drop=True)
    order = [*methods, RANDOM]
    grouped = per_example.groupby("method", sort=False)[list(MEASURES)]
    summary = pd.concat({"mean": grouped.mean(), "std": grouped.std(ddof=0)}, axis=1).swaplevel(axis=1)
    summary = summary[[(m, s) for m in MEASURES for s in ("mean", "std")]].reindex(order)
    first = per_example.drop_duplicates("example")
    return DatasetEvaluation(per_example, summary, float(first["correct"].mean()), count, tuple(not_computed), grid)


def markdown_table(summary: pd.DataFrame, digits: int = 3, not_computed: Sequence[str] = ()) -> str:
    """Summary (method x (measure, mean/std)) as a markdown table of "mean ± std" cells (`NOT_COMPUTED` in the
    `not_computed` columns, "n/a" where a computed measure has no value)."""
    measures = list(dict.fromkeys(m for m, _ in summary.columns))
    head = "| method | " + " | ".join(f"{m} {'↓' if BETTER.get(m) == 'lower' else '↑'}" for m in measures) + " |"
    lines = [head, "|" + "---|" * (len(measures) + 1)]
    for method, row in summary.iterrows():
        cells = []
        for m in measures:
            mean, std = row[(m, "mean")], row[(m, "std")]
            if m in not_computed:
                cells.append(NOT_COMPUTED)
            else:
                cells.append("n/a" if pd.isna(mean) else f"{mean:.{digits}f} ± {std:.{digits}f}")
        lines.append(f"| {method} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"
