"""A plain-language paragraph under each explanation, computed from its numbers only.

It must never claim more than the numbers say: it names the method exactly, says when the map is flat
(the top share barely above uniform), how much of the raw mass special tokens took before the shown
map was renormalised, that plain rollout is the same whatever class is asked about, and truncation.
"""
from __future__ import annotations

import numpy as np

from rollout_core.compare import word_scores
from rollout_core.explanation import Explanation

FLAT_RATIO = 1.5  # top share below 1.5x uniform = "nearly flat"

METHOD_NAMES = {
    "rollout": "attention rollout",
    "flow": "attention flow",
    "gradient": "gradient-weighted rollout (class-specific)",
    "attention": "raw attention of the last layer",
}


def _percent(value: float) -> str:
    return f"{100 * value:.0f}%" if value >= 0.01 else f"{100 * value:.1f}%"


def _method_phrase(expl: Explanation) -> str:
    s = expl.settings
    name = METHOD_NAMES.get(expl.method, expl.method)
    if expl.method == "attention":
        return f"{name}, {s.get('head_fusion', 'mean')} over {s.get('model_heads', '?')} heads"
    start = int(s.get("start_layer") or 0)
    layers = expl.num_layers
    through = f"through {layers} layer{'s' if layers != 1 else ''}" + (f" from layer {start + 1}" if start else "")
    if expl.method == "gradient":
        return f"{name} {through}"
    return f"{name} {through}, {s.get('head_fusion', 'mean')} over {s.get('model_heads', '?')} heads"


def _units(expl: Explanation) -> tuple[list[str], np.ndarray]:
    """Words of the text (merged subwords) or shown tokens; their shares sum to 1."""
    if expl.kind == "text" and expl.text is not None and expl.offsets is not None:
        merged = word_scores(expl)
        if merged:
            return [w for w, *_ in merged], np.array([v for *_, v in merged])
    return expl.display_tokens(), expl.display_scores()


def _prediction_phrase(expl: Explanation) -> str:
    if not expl.prediction:
        return "The model has no classifier, so the map explains its output representation"
    top = expl.prediction[0]
    if expl.settings.get("task") == "causal-lm":
        return f"The next-token prediction {top.label!r} ({_percent(top.probability)})"
    return f"The prediction {top.label} ({_percent(top.probability)})"


def _text_body(expl: Explanation, lead: str) -> str:
    units, shares = _units(expl)
    if len(units) == 0 or shares.sum() <= 0:
        return f"{lead} has no shown token with a non-zero score."
    order = np.argsort(-shares, kind="stable")
    uniform = 1.0 / len(units)
    if shares[order[0]] < FLAT_RATIO * uniform:
        return (f"{lead} is spread almost evenly: the largest share, {units[order[0]]!r} "
                f"({_percent(shares[order[0]])}), is close to the uniform share of {_percent(uniform)} "
                f"over {len(units)} words, so no word stands out.")
    picked = [i for i in order[:3] if shares[i] >= uniform]
    named = [f"{units[i]!r} ({_percent(shares[i])})" for i in picked]
    listing = named[0] if len(named) == 1 else ", ".join(named[:-1]) + " and " + named[-1]
    verb = "rests mostly on" if shares[picked].sum() >= 0.5 else "gives its largest shares to"
    return f"{lead} {verb} {listing} of {len(units)} words (uniform share {_percent(uniform)})."


def _image_body(expl: Explanation, lead: str) -> str:
    score_map = expl.score_map()
    rows, cols = score_map.shape
    flat = np.sort(score_map.ravel())[::-1]
    if flat.sum() <= 0:
        return f"{lead} has no patch with a non-zero score."
    top_count = max(1, int(round(0.1 * flat.size)))
    top_share = float(flat[:top_count].sum())
    half_r, half_c = rows / 2, cols / 2
    quarters = {
        "top-left": score_map[: int(np.ceil(half_r)), : int(np.ceil(half_c))].sum(),
        "top-right": score_map[: int(np.ceil(half_r)), int(np.floor(half_c)):].sum(),
        "bottom-left": score_map[int(np.floor(half_r)):, : int(np.ceil(half_c))].sum(),
        "bottom-right": score_map[int(np.floor(half_r)):, int(np.floor(half_c)):].sum(),
    }
    best = max(quarters, key=quarters.get)
    spread = "spread fairly evenly" if top_share < 0.2 else "concentrated"
    return (f"{lead} is {spread}: the top 10% of the {rows}x{cols} patches hold {_percent(top_share)} of the "
            f"mass (uniform would be 10%); the {best} quarter holds the most ({_percent(quarters[best])}).")


def summarise(expl: Explanation) -> str:
    """One paragraph, plain text, e.g. "The prediction NEGATIVE (97%) rests mostly on 'rude' (31%) ..."."""
    lead = f"{_prediction_phrase(expl)}: the map"
    body = _text_body(expl, lead) if expl.kind == "text" else _image_body(expl, lead)
    parts = [body, f"Method: {_method_phrase(expl)}, read from the {expl.target_description}."]
    special_share = float(np.asarray(expl.scores)[expl.special].sum())
    total = float(np.asarray(expl.scores).sum())
    if total > 0 and special_share / total >= 0.5:
        parts.append(f"Special tokens took {_percent(special_share / total)} of the raw mass; the shares above are "
                     "renormalised over the shown tokens.")
    asked_other_class = expl.target is not None and bool(expl.prediction) and str(expl.target) != expl.prediction[0].label
    if expl.method in ("rollout", "flow", "attention") and asked_other_class and expl.settings.get("task") != "causal-lm":
        parts.append("Plain rollout, flow and raw attention do not depend on the class asked about; "
                     "use gradient-weighted rollout for a class-specific map.")
    if expl.truncation:
        t = expl.truncation
        parts.append(f"The text was cut to the model's limit: {t['kept_chars']} of {t['total_chars']} characters "
                     f"({t['kept_tokens']} tokens) were explained.")
    return " ".join(parts)
