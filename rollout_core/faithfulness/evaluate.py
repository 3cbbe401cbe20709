"""Faithfulness of every method on one input (`evaluate_input`) or a data set (`evaluate_dataset`).

For each input: explain it with each method, prepare it once (`scoring`), then for every importance
vector (the method's scores over the non-special positions) compute the four perturbation curves, the
ground-truth measures when the input has a known deciding region, and the rank agreement with the
attention-free references (gradient x input, integrated gradients). The `random` row is the mean over
`seeds` random orderings, so every number can be read against chance. The references themselves can be
added as methods ("grad_x_input", "integrated_gradients") to see what an attention-free method scores.

Measures (arrows: which direction is better):
  deletion_auc v, insertion_auc ^ (probability of the predicted class, 0..1),
  positive_auc v, negative_auc ^ (Chefer et al. accuracy AUC x 100 over 0..0.9),
  pointing_game ^, mass_share ^, iou ^ (ground truth), spearman_gxi ^, spearman_ig ^ (agreement).
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence

import numpy as np
import pandas as pd
import torch

from rollout_core import methods as method_registry
from rollout_core.budget import checkpoint
from rollout_core.errors import InputError
from rollout_core.explanation import Explanation
from rollout_core.faithfulness import attribution, ground_truth
from rollout_core.faithfulness.perturbation import (
    CHEFER_FRACTIONS,
    CURVE_FRACTIONS,
    CurveSet,
    perturbation_curves_many,
)
from rollout_core.faithfulness.scoring import MAX_BATCH, PreparedInput, prepare_image, prepare_text, require_classifier
from rollout_core.models.handle import ModelHandle

METHODS = method_registry.names()
REFERENCES = ("grad_x_input", "integrated_gradients")
RANDOM = "random"
RANDOM_SEEDS = 3
GENERATED_SIZE = 100
"""Examples drawn from a generated data set when no limit is given."""
IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".bmp", ".gif", ".webp", ".tif", ".tiff")
MEASURES = ("deletion_auc", "insertion_auc", "positive_auc", "negative_auc", "pointing_game", "mass_share", "iou",
            "spearman_gxi", "spearman_ig")
BETTER = {"deletion_auc": "lower", "insertion_auc": "higher", "positive_auc": "lower", "negative_auc": "higher",
          "pointing_game": "higher", "mass_share": "higher", "iou": "higher", "spearman_gxi": "higher",
          "spearman_ig": "higher"}

Progress = Callable[[int, int], None]
"""progress(done, total): called with 0 once the data set is read, then after each example."""
StepProgress = Callable[[int, int, str], None]
"""progress(done, total, what) on one input, in model passes: one per explanation, one for gradient x input, the
integrated-gradient steps, then the perturbed inputs scored (`total` shrinks to the exact count once known)."""


@dataclass
class Item:
    """One input with its label (None: the prediction is the reference) and ground truth when known."""

    input: Any  # text (str) or image (path, bytes, PIL image, array)
    label: str | None = None
    evidence: list[tuple[int, int]] | None = None  # text: deciding character spans
    mask: np.ndarray | None = None  # image: (H, W) bool deciding pixels


@dataclass
class InputEvaluation:
    """Curves and measures of every method (and the random baseline) on one input."""

    curves: pd.DataFrame  # long: method, curve ("deletion", "insertion", "positive", "negative"), fraction, value
    table: pd.DataFrame  # index method, columns MEASURES
    predicted: str  # the originally predicted label (the target of every curve)
    probability: float  # its probability on the unperturbed input
    explanations: dict[str, Explanation] = field(default_factory=dict)


@dataclass
class DatasetEvaluation:
    """Per-example measures and the method x measure summary (mean and std over examples)."""

    per_example: pd.DataFrame  # example, method, label, predicted, correct, MEASURES...
    summary: pd.DataFrame  # index method, columns (measure, "mean" | "std")
    accuracy: float  # of the model on the unperturbed examples
    count: int

    def markdown(self) -> str:
        return markdown_table(self.summary)


# ----------------------------------------------------------------------------------------------
# Public API


def evaluate_input(
    model: str | os.PathLike[str] | ModelHandle | None,
    input: Any,
    methods: Sequence[str] = METHODS,
    *,
    label: str | None = None,
    evidence: list[tuple[int, int]] | None = None,
    mask: np.ndarray | None = None,
    seeds: int = RANDOM_SEEDS,
    progress: StepProgress | None = None,
    **options: Any,
) -> InputEvaluation:
    """Every method's curves and measures on one text or image (the handle's modality decides which).

    `label`: the true class for the accuracy curves (default: the original prediction); `evidence`
    (text) / `mask` (image): the deciding region for the ground-truth measures (NaN without).
    `options` go to explain_text / explain_image (head_fusion, residual_weight, start_layer, ...).
    `progress` is told how far the work is (`StepProgress`).
    """
    handle = _handle(model)
    label = None if label is None else _label(label, handle.labels or [], "label")
    result = _evaluate_item(handle, Item(input, label, evidence, mask), _methods(methods), seeds, options,
                            progress=progress)
    table = pd.DataFrame([{k: r[k] for k in ("method", *MEASURES)} for r in result.rows]).set_index("method")
    return InputEvaluation(curves=result.curves, table=table, predicted=result.predicted,
                           probability=result.probability, explanations=result.explanations)


def evaluate_dataset(
    model: str | os.PathLike[str] | ModelHandle | None,
    dataset: str | os.PathLike[str],
    methods: Sequence[str] = METHODS,
    *,
    limit: int | None = None,
    progress: Progress | None = None,
    seeds: int = RANDOM_SEEDS,
    agreement: bool = True,
    engine: str = "local",
    workers: int = 2,
    **options: Any,
) -> DatasetEvaluation:
    """Measures over a data set: "text" / "image" (the generated test sets, with ground truth), a CSV
    file with `text` and `label` columns, or a folder with one sub-folder of images per class.
    `agreement=False` skips the references (spearman columns NaN) unless they are asked for as methods.
    `engine="ray"`: the examples spread over `workers` Ray actors (each loads the model once); same rows."""
    generated = dataset if dataset in ("text", "image") else None
    handle = _handle(model, generated or ("image" if Path(dataset).is_dir() else "text"), check=generated is not None)
    methods = _methods(methods)
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 1):
        raise InputError(f"limit must be a positive integer, not {limit!r}")
    items = _dataset_items(handle, dataset, limit)
    if engine == "ray":
        from rollout_core.faithfulness.ray_evaluate import evaluate_on_ray

        rows = evaluate_on_ray(model if isinstance(model, (str, os.PathLike)) else handle.name, items, methods,
                               seeds, options, agreement, workers=workers, progress=progress)
    elif engine == "local":
        rows = []
        if progress is not None:
            progress(0, len(items))
        for index, item in enumerate(items):
            checkpoint()  # between examples: a stopped session stops the evaluation here (rollout_core.budget)
            rows.extend(item_rows(handle, index, item, methods, seeds, options, agreement))
            if progress is not None:
                progress(index + 1, len(items))
    else:
        raise InputError(f"unknown engine {engine!r}; choose local or ray")
    return summarize(rows, methods, len(items))


def item_rows(handle: ModelHandle, index: int, item: Item, methods: list[str], seeds: int, options: dict[str, Any],
              agreement: bool) -> list[dict[str, Any]]:
    """The per-example rows (one per method and the random baseline) of data-set example `index`."""
    result = _evaluate_item(handle, item, methods, seeds, options, index, agreement=agreement)
    return [{"example": index, "label": item.label, "predicted": result.predicted,
             "correct": item.label == result.predicted, **row} for row in result.rows]


def summarize(rows: list[dict[str, Any]], methods: Sequence[str], count: int) -> DatasetEvaluation:
    """The method x measure summary (mean and std over examples) of per-example rows, in `methods` order."""
    per_example = pd.DataFrame(rows).sort_values(["example"], kind="stable").reset_index(drop=True)
    order = [*methods, RANDOM]
    grouped = per_example.groupby("method", sort=False)[list(MEASURES)]
    summary = pd.concat({"mean": grouped.mean(), "std": grouped.std(ddof=0)}, axis=1).swaplevel(axis=1)
    summary = summary[[(m, s) for m in MEASURES for s in ("mean", "std")]].reindex(order)
    first = per_example.drop_duplicates("example")
    return DatasetEvaluation(per_example, summary, float(first["correct"].mean()), count)


def markdown_table(summary: pd.DataFrame, digits: int = 3) -> str:
    """Summary (method x (measure, mean/std)) as a markdown table of "mean ± std" cells."""
    measures = list(dict.fromkeys(m for m, _ in summary.columns))
    head = "| method | " + " | ".join(f"{m} {'↓' if BETTER.get(m) == 'lower' else '↑'}" for m in measures) + " |"
    lines = [head, "|" + "---|" * (len(measures) + 1)]
    for method, row in summary.iterrows():
        cells = []
        for m in measures:
            mean, std = row[(m, "mean")], row[(m, "std")]
            cells.append("n/a" if pd.isna(mean) else f"{mean:.{digits}f} ± {std:.{digits}f}")
        lines.append(f"| {method} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


# ----------------------------------------------------------------------------------------------
# One item


@dataclass
class _ItemResult:
    rows: list[dict[str, Any]]
    curves: pd.DataFrame
    predicted: str
    probability: float
    explanations: dict[str, Explanation]


def _evaluate_item(handle: ModelHandle, item: Item, methods: list[str], seeds: int,
                   options: dict[str, Any], index: int = 0, agreement: bool = True,
                   progress: StepProgress | None = None) -> _ItemResult:
    """All measures of one item; `index` picks its own random orderings (seeds index * seeds ...)."""
    from rollout_core.explain import explain_image, explain_text

    text = handle.modality == "text"
    prepared = prepare_text(handle, item.input) if text else prepare_image(handle, item.input)
    probs = prepared.probabilities(torch.ones(1, prepared.n, dtype=torch.bool))[0]
    target = int(probs.argmax())
    labels = handle.labels or []
    label = None if item.label is None else labels.index(item.label)
    explain = explain_text if text else explain_image
    explained = [m for m in methods if m not in REFERENCES]
    bound = (len(methods) + seeds) * sum(len(f) for f in (CURVE_FRACTIONS, CURVE_FRACTIONS, CHEFER_FRACTIONS,
                                                             CHEFER_FRACTIONS))
    done, before = 0, len(explained) + 1 + attribution.IG_STEPS
    report = progress or (lambda done, total, what: None)
    explanations = {}
    for m in explained:
        report(done, before + bound, f"explaining with {m}")
        explanations[m] = explain(handle, item.input, method=m, target=target, **options)
        done += 1
    first = next(iter(explanations.values()), None) or explain(handle, item.input, method="attention", target=target)
    if len(first.tokens) != prepared.n:
        raise InputError(f"the explanation has {len(first.tokens)} positions but the model input {prepared.n}")
    region = _region(first, item)
    references = {}
    if agreement or "grad_x_input" in methods:
        report(done, before + bound, "gradient × input (reference)")
        references["grad_x_input"] = attribution.input_x_gradient(prepared, target)
    if agreement or "integrated_gradients" in methods:
        report(done + 1, before + bound, "integrated gradients (reference)")
        steps = None if progress is None else (lambda k: report(done + 1 + k, before + bound,
                                                                f"integrated gradients (reference, step {k})"))
        references["integrated_gradients"] = attribution.integrated_gradients(prepared, target, progress=steps)
    importances: dict[str, list[torch.Tensor]] = {
        m: [references[m] if m in REFERENCES else torch.as_tensor(explanations[m].scores)] for m in methods}
    importances[RANDOM] = [torch.rand(prepared.n, generator=torch.Generator().manual_seed(index * seeds + s),
                                      dtype=torch.float64) for s in range(seeds)]
    flat = [(method, v) for method, vectors in importances.items() for v in vectors]
    report(before, before + bound, "scoring the perturbed inputs")
    scored = None if progress is None else (lambda k, n: report(before + k, before + n,
                                                                 f"scoring the perturbed inputs ({k}/{n})"))
    curve_sets = perturbation_curves_many(prepared.probabilities, [v for _, v in flat], prepared.removable,
                                          target=target, label=label, progress=scored,
                                          chunk=MAX_BATCH)
    measured: dict[str, list[tuple[dict[str, float], CurveSet]]] = {}
    for (method, vector), curve_set in zip(flat, curve_sets):
        measured.setdefault(method, []).append((_measures(prepared, vector, curve_set, region, references), curve_set))
    rows, curves = [], []
    for method, results in measured.items():
        rows.append({"method": method, **{k: float(np.mean([m[k] for m, _ in results])) for k in MEASURES}})
        first_set = results[0][1]
        for name, fractions in first_set.fractions.items():
            values = np.mean([c.values[name] for _, c in results], axis=0)
            curves.extend({"method": method, "curve": name, "fraction": f, "value": float(v)}
                          for f, v in zip(fractions, values))
    return _ItemResult(rows, pd.DataFrame(curves), labels[target], float(probs[target]), explanations)


def _measures(prepared: PreparedInput, importance: torch.Tensor, curves: CurveSet, region: np.ndarray | None,
              references: dict[str, torch.Tensor]) -> dict[str, float]:
    shown = prepared.removable.cpu().numpy()
    scores = importance.cpu().numpy()
    out = {f"{name}_auc": curves.auc[name] for name in curves.auc}
    nan = float("nan")
    out["pointing_game"] = nan if region is None else ground_truth.pointing_game(scores, region, shown)
    out["mass_share"] = nan if region is None else ground_truth.mass_share(scores, region, shown)
    out["iou"] = nan if region is None else ground_truth.iou_at_mass(scores, region, shown)
    for column, name in (("spearman_gxi", "grad_x_input"), ("spearman_ig", "integrated_gradients")):
        out[column] = nan if name not in references else attribution.spearman(scores[shown],
                                                                              references[name].cpu().numpy()[shown])
    return out


def _region(explanation: Explanation, item: Item) -> np.ndarray | None:
    n = len(explanation.tokens)
    if item.evidence is not None and explanation.offsets is not None:
        return ground_truth.text_region(explanation.offsets, explanation.special, item.evidence)
    if item.mask is not None and explanation.grid is not None:
        return ground_truth.patch_region(item.mask, explanation.image.shape[:2], explanation.grid,
                                         explanation.patch_positions, n)
    return None


# ----------------------------------------------------------------------------------------------
# Models, methods, data sets


def _handle(model: Any, modality: str = "text", check: bool = False) -> ModelHandle:
    """The model (None: the default model of `modality`); `check`: it must be of that modality."""
    from rollout_core.models.loading import load_model
    from rollout_core.models.registry import DEFAULTS

    if isinstance(model, ModelHandle):
        handle = model
    elif model is None:
        handle = load_model(DEFAULTS[modality])
    else:
        handle = load_model(model)
    require_classifier(handle)
    if check and handle.modality != modality:
        kind = "an image" if handle.modality == "image" else "a text"
        raise InputError(f"the {modality} data set needs a {modality} model; {handle.name} is {kind} model")
    return handle


def _methods(methods: Sequence[str]) -> list[str]:
    if isinstance(methods, str):
        methods = [methods]
    allowed = (*METHODS, *REFERENCES)
    unknown = [m for m in methods if m not in allowed]
    if unknown or not methods:
        raise InputError(f"unknown method(s) {', '.join(map(repr, unknown)) or '(none given)'}; "
                         f"choose from: {', '.join(allowed)}")
    return list(dict.fromkeys(methods))


def _label(value: Any, labels: list[str], where: str) -> str:
    text = str(value).strip()
    for name in labels:
        if text.lower() == name.lower():
            return name
    if text.lstrip("-").isdigit() and 0 <= int(text) < len(labels):
        return labels[int(text)]
    raise InputError(f"{where}: label {value!r} is not one of the model's labels ({', '.join(labels)}) or an index")


def _dataset_items(handle: ModelHandle, dataset: Any, limit: int | None) -> list[Item]:
    labels = handle.labels or []
    if dataset == "text":
        from rollout_core.data import sentiment

        found = sentiment.generate(limit or GENERATED_SIZE, split="test")
        items = [Item(e.text, _label(e.label, labels, "generated text"), evidence=list(e.evidence)) for e in found]
    elif dataset == "image":
        from rollout_core.data import shapes

        found = shapes.generate(limit or GENERATED_SIZE, split="test")
        items = [Item(e.image, _label(e.label, labels, "generated shapes"), mask=e.mask) for e in found]
    else:
        items = list(_user_items(handle, Path(dataset), labels))
        items = items[:limit] if limit else items
    if not items:
        raise InputError(f"the data set {dataset!s} holds no examples")
    return items


def _user_items(handle: ModelHandle, path: Path, labels: list[str]) -> Iterator[Item]:
    if path.is_file() and path.suffix.lower() == ".csv":
        if handle.modality != "text":
            raise InputError(f"a CSV data set holds texts; {handle.name} is an image model")
        try:
            frame = pd.read_csv(path, dtype=str, keep_default_na=False)
        except (ValueError, OSError, UnicodeDecodeError) as err:
            raise InputError(f"could not read {path}: {err}") from err
        missing = {"text", "label"} - set(frame.columns)
        if missing:
            raise InputError(f"{path} needs the columns 'text' and 'label' (missing: {', '.join(sorted(missing))})")
        for line, (text, value) in enumerate(zip(frame["text"], frame["label"]), start=2):
            yield Item(text, _label(value, labels, f"{path.name} line {line}"))
    elif path.is_dir():
        if handle.modality != "image":
            raise InputError(f"an image folder needs an image model; {handle.name} is a text model")
        classes = sorted(p for p in path.iterdir() if p.is_dir())
        if not classes:
            raise InputError(f"{path} needs one sub-folder of images per class (named like the model's labels)")
        files = [[f for f in sorted(c.iterdir()) if f.suffix.lower() in IMAGE_SUFFIXES] for c in classes]
        names = [_label(c.name, labels, f"folder {c.name}") for c in classes]
        for rank in range(max(map(len, files))):  # round-robin over classes, so a limit keeps them balanced
            for name, group in zip(names, files):
                if rank < len(group):
                    yield Item(group[rank], name)
    else:
        raise InputError(f"dataset must be 'text', 'image', a .csv file or an image folder; {path} is none of these")
