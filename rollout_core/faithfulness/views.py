"""What the Evaluate page draws: a curves figure per curve kind, and the tables with plain labels and units.

The figure itself is `rollout_core.figures.curves_figure` (one line per method, random dashed grey); this
module only picks the curve, the axis words and the areas out of an `InputEvaluation`, and turns the
measure x method numbers into rows a reader can follow (name, which way is better, the scale).
"""
from __future__ import annotations

from typing import Any, Sequence

import pandas as pd

from rollout_core.faithfulness.evaluate import (
    BETTER,
    FULL_GRID,
    GRIDS,
    MEASURES,
    NOT_COMPUTED,
    RANDOM,
    InputEvaluation,
)
from rollout_core.faithfulness.perturbation import CURVES, Grid

_WORDS = {
    "deletion": ("Deletion (lower area = more faithful)", "fraction removed (most relevant first)",
                 "probability of the predicted class"),
    "insertion": ("Insertion (higher area = more faithful)", "fraction put back (most relevant first)",
                  "probability of the predicted class"),
    "positive": ("Positive perturbation, Chefer et al. (lower AUC = better)", "fraction removed (most relevant first)",
                 "prediction kept (1 = correct)"),
    "negative": ("Negative perturbation, Chefer et al. (higher AUC = better)",
                 "fraction removed (least relevant first)", "prediction kept (1 = correct)"),
}

MEASURE_LABELS = {
    "deletion_auc": ("Deletion AUC", "0–1 (probability)"),
    "insertion_auc": ("Insertion AUC", "0–1 (probability)"),
    "positive_auc": ("Positive perturbation AUC (Chefer)", "×100: 0–90 (accuracy over 0–0.9 removed)"),
    "negative_auc": ("Negative perturbation AUC (Chefer)", "×100: 0–90 (accuracy over 0–0.9 removed)"),
    "pointing_game": ("Pointing game (top point in the region)", "0–1 (hit rate)"),
    "mass_share": ("Relevance mass inside the region", "0–1 (share)"),
    "iou": ("IoU with the region", "0–1"),
    "spearman_gxi": ("Rank agreement with gradient × input", "−1–1 (Spearman)"),
    "spearman_ig": ("Rank agreement with integrated gradients", "−1–1 (Spearman)"),
}
"""measure -> (row label, its scale on the full grid): the Chefer AUCs stay on the paper's ×100 scale and the row says
so (`_scale`: on another grid, their range is its own)."""
GROUND_TRUTH = ("pointing_game", "mass_share", "iou")
NO_REGION = ("Pointing game, relevance mass and IoU need a known deciding region (the generated data sets have "
             "one), so they are left out for this input.")
NOT_ASKED = (f"“{NOT_COMPUTED}”: the reference of that agreement row was not asked for. On one input the "
             "references run only when ticked (they cost about as much as the rest of a sentence's evaluation); "
             "over a data set gradient × input always runs, integrated gradients on text or when ticked.")
SCALE_NOTE = ("Each row has its own scale (column “scale”): deletion/insertion areas are probabilities (0–1), "
              "the Chefer AUCs are accuracy × 100 as in the paper, agreement is a rank correlation (−1–1). "
              f"“{RANDOM}” is chance: one random ordering per input (over a data set, the mean of the examples' "
              "own orderings).")


def curve_figure(evaluation: InputEvaluation, curve: str = "deletion") -> Any:
    """Plotly figure of one curve kind ("deletion", "insertion", "positive", "negative") for every method."""
    from rollout_core.figures import curves_figure

    if curve not in CURVES:
        raise ValueError(f"unknown curve {curve!r}; choose one of {CURVES}")
    rows = evaluation.curves[evaluation.curves["curve"] == curve]
    lines = {m: (g["fraction"].tolist(), g["value"].tolist()) for m, g in rows.groupby("method", sort=False)}
    random = lines.pop(RANDOM, None)
    title, x_title, y_title = _WORDS[curve]
    aucs = evaluation.table[f"{curve}_auc"].to_dict()
    return curves_figure(lines, random=random, title=title, x_title=x_title, y_title=y_title, aucs=aucs)


def _cell(measure: str, value: float, std: float | None = None, computed: bool = True) -> str:
    if not computed:
        return NOT_COMPUTED
    if pd.isna(value):
        return "n/a"
    digits = 1 if measure in ("positive_auc", "negative_auc") else 3
    return f"{value:.{digits}f}" + ("" if std is None or pd.isna(std) else f" ± {std:.{digits}f}")


def _scale(measure: str, grid: Grid) -> str:
    """The measure's scale in words; the Chefer AUCs' range is the grid's last Chefer fraction x 100."""
    if measure not in ("positive_auc", "negative_auc") or grid.name == FULL_GRID:
        return MEASURE_LABELS[measure][1]
    end = grid.chefer[-1]
    return f"×100: 0–{100 * end:g} (accuracy over 0–{end:g} removed)"


def _rows(methods: list[str], cells: dict[str, dict[str, str]], measures: list[str],
          grid: Grid = GRIDS[FULL_GRID]) -> pd.DataFrame:
    rows = [{"measure": MEASURE_LABELS[m][0], "better": "higher ↑" if BETTER[m] == "higher" else "lower ↓",
             "scale": _scale(m, grid), **{method: cells[m][method] for method in methods}} for m in measures]
    return pd.DataFrame(rows).set_index("measure")


def _notes(measures: list[str], not_computed: Sequence[str]) -> list[str]:
    return ([SCALE_NOTE] + ([NO_REGION] if any(m not in measures for m in GROUND_TRUTH) else [])
            + ([NOT_ASKED] if not_computed else []))


def readable_table(table: pd.DataFrame, not_computed: Sequence[str] = (),
                   grid: str = FULL_GRID) -> tuple[pd.DataFrame, list[str]]:
    """One input's method x measure table as measure rows (label, better, scale, one column per method) of
    formatted cells ("n/a" where a method has no value, `NOT_COMPUTED` in the `not_computed` rows), and notes for
    the reader. Measures no method has (the ground-truth ones without a region) are left out, with a note saying
    why. `grid`: the one the curves were read at (the Chefer rows' scale)."""
    measures = [m for m in MEASURES if m in table.columns and (table[m].notna().any() or m in not_computed)]
    methods = [str(m) for m in table.index]
    cells = {m: {str(method): _cell(m, table.at[method, m], computed=m not in not_computed) for method in table.index}
             for m in measures}
    return _rows(methods, cells, measures, GRIDS[grid]), _notes(measures, not_computed)


def readable_summary(summary: pd.DataFrame, not_computed: Sequence[str] = ()) -> tuple[pd.DataFrame, list[str]]:
    """A data set's summary ((measure, mean | std) columns) as `readable_table` rows of "mean ± std" cells."""
    present = dict.fromkeys(m for m, _ in summary.columns)
    measures = [m for m in MEASURES if m in present and (summary[(m, "mean")].notna().any() or m in not_computed)]
    methods = [str(m) for m in summary.index]
    cells = {m: {str(method): _cell(m, summary.at[method, (m, "mean")], summary.at[method, (m, "std")],
                                    m not in not_computed)
                 for method in summary.index} for m in measures}
    return _rows(methods, cells, measures), _notes(measures, not_computed)


REFERENCE_WORDS = {"gxi": "gradient × input", "ig": "integrated gradients"}


def what_ran(evaluation: InputEvaluation) -> str:
    """What one input's evaluation ran, in words: methods, random orderings, references (or that none were asked
    for), the grid the curves were read at, and the perturbed inputs scored in how many forward passes."""
    from rollout_core.methods import display_name

    names = [display_name(str(m)) for m in evaluation.table.index if m != RANDOM]
    orderings = f"{evaluation.seeds} random ordering{'s' if evaluation.seeds != 1 else ''}"
    asked = [REFERENCE_WORDS[r] for r in evaluation.references]
    references = (f"agreement with {' and '.join(asked)}" if asked
                  else "no attention-free reference (tick one above to add its agreement row)")
    passes = f"{evaluation.passes} forward pass{'es' if evaluation.passes != 1 else ''}"
    grid = f"curves read at {GRIDS[evaluation.grid].words()}" + (
        "" if evaluation.grid == FULL_GRID else f", not the full protocol's {FULL_GRID} (choose it above)")
    removal = "" if evaluation.baseline is None else (
        f" Removed positions became {evaluation.baseline.words(evaluation.predicted)}.")
    return (f"Ran: {', '.join(names)}; {orderings} (the chance row); {references}; {grid}. "
            f"{evaluation.scored} perturbed inputs, shared between methods, scored in {passes}.{removal}")


def progress_text(done: int, total: int, elapsed: float, what: str = "", unit: str | None = "model passes") -> str:
    """A progress line with the count and the time left at the pace so far, e.g.
    "explaining with flow · 12/57 model passes · about 8 s left" (no estimate before the first pass). `unit` None:
    done and total are milliseconds of work (one input's `StepProgress`), so no count is shown."""
    head = f"{what} · " if what else ""
    count = "" if unit is None else f"{max(done, 0)}/{max(total, 0)} {unit}"
    if done <= 0 or total <= 0:
        return f"{head}{count}".rstrip(" ·") or "starting"
    left = elapsed * (total - done) / done
    eta = f"about {left:.0f} s left" if left < 90 else f"about {left / 60:.1f} min left"
    return f"{head}{count + ' · ' if count else ''}{eta}"
