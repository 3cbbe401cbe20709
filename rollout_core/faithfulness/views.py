"""What the Evaluate page draws for one input: a curves figure per curve kind, from `evaluate_input`'s result.

The figure itself is `rollout_core.figures.curves_figure` (one line per method, random dashed grey); this
module only picks the curve, the axis words and the areas out of an `InputEvaluation`.
"""
from __future__ import annotations

from typing import Any

from rollout_core.faithfulness.evaluate import RANDOM, InputEvaluation
from rollout_core.faithfulness.perturbation import CURVES

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
