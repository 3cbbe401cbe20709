"""A plain-language paragraph under each explanation, computed from its numbers only.

It must never claim more than the numbers say: it names the method exactly, says when the map is flat
(the top share barely above the uniform share), how much of the raw mass special tokens took before the
shown map was renormalised, that plain rollout/flow/attention are the same whatever class is asked
about, attention sinks (tokens that take far more attention than uniform while passing little), and truncation.
Plain text (the pages render it as text, not HTML).
"""
from __future__ import annotations

import numpy as np

from rollout_core import methods
from rollout_core.compare import word_scores
from rollout_core.explanation_data import ExplanationData

FLAT_RATIO = 1.5
"""The map is called nearly flat when its largest share is below 1.5x the uniform share 1/n."""
SPECIAL_MAJORITY = 0.5
"""Special tokens' raw share at or above which the summary says they took most of the mass."""


def summarize(expl: ExplanationData, top_k: int = 3, *, layer: int | None = None, raw_attention: bool = False) -> str:
    """One paragraph, e.g. "The prediction NEGATIVE (97%) rests mostly on 'rude' (31%) and 'cold' (22%) ...".

    `layer` / `raw_attention` describe the slider's view (cumulative result after layer index `layer`, or
    that layer's own attention) instead of the final scores. Text shares are per word (tokens merged by
    character offsets, `rollout_core.compare.word_scores`); image shares per patch.
    """
    scores = _row(expl, layer, raw_attention)
    lead = f"{_prediction_phrase(expl)}: the map"
    body = _text_body(expl, scores, lead, top_k) if expl.kind == "text" else _image_body(expl, scores, lead)
    parts = [body, f"Method: {_method_phrase(expl, layer, raw_attention)}, read from the {expl.target_description}."]
    total = float(scores.sum())
    special_share = float(scores[np.asarray(expl.special, dtype=bool)].sum()) / total if total > 0 else 0.0
    if special_share >= SPECIAL_MAJORITY:
        parts.append(
            f"Special tokens took {_percent(special_share)} of the raw mass before renormalisation; the shares "
            f"above are of the remaining {_percent(1 - special_share)}."
        )
    spec = _spec(expl.method)
    if spec is not None and not spec.class_specific and _asked_about_a_class(expl):
        specific = " or ".join(s.phrase for s in methods.all_methods() if s.class_specific)
        parts.append(
            f"You asked about class {expl.target}, but plain {spec.phrase} is class-agnostic: the "
            f"map is the same whichever class is asked about; use {specific} instead."
        )
    sinks = expl.extras.get("sinks")
    if sinks and any(sinks["positions"]):
        from rollout_core.maths.sinks import describe_sink_facts

        note = spec.summary_note if spec is not None else ""
        parts.append(f"Attention sinks: {describe_sink_facts(sinks, expl.tokens)}" + (f" {note}" if note else ""))
    if expl.truncation:
        t = expl.truncation
        parts.append(
            f"The text was cut to the model's limit: the first {t['kept_chars']} of {t['total_chars']} characters "
            f"({t['kept_tokens']} tokens) were explained; the rest was not seen."
        )
    return " ".join(parts)


summarise = summarize  # the spelling the pages call


def _spec(name: str) -> methods.MethodSpec | None:
    """The registered spec of `name`, or None for a method this version does not know (an old saved file)."""
    return next((s for s in methods.all_methods() if s.name == name), None)


def _row(expl: ExplanationData, layer: int | None, raw_attention: bool) -> np.ndarray:
    if layer is None:
        return np.asarray(expl.scores, dtype=np.float64)
    source = expl.layer_attention_scores if raw_attention else expl.layer_scores
    return np.asarray(source[layer], dtype=np.float64)


def _percent(value: float) -> str:
    return f"{100 * value:.0f}%" if value >= 0.01 else f"{100 * value:.1f}%"


def _asked_about_a_class(expl: ExplanationData) -> bool:
    """A class target the user chose (not the default predicted class, which explain marks "(predicted)")."""
    if not isinstance(expl.target, str) or expl.settings.get("task") == "causal-lm":
        return False
    return "(predicted)" not in expl.target_description


def _method_phrase(expl: ExplanationData, layer: int | None, raw_attention: bool) -> str:
    s = expl.settings
    start = int(s.get("start_layer") or 0)
    last = start + (expl.num_layers if layer is None else layer + 1)  # 1-based number of the last layer used
    heads = s.get("model_heads")
    fusion = f"{s.get('head_fusion', 'mean')} over {f'{heads} heads' if heads else 'heads'}"
    spec = _spec(expl.method)
    if raw_attention or (spec is not None and spec.single_layer):
        if spec is not None and spec.layer_view != "raw attention":
            return f"{spec.layer_view} of layer {last}"
        return f"raw attention of layer {last}, {fusion}"
    if spec is not None and not spec.cumulative:  # one map of the whole model (AttnLRP): no layer range to name
        return f"{spec.phrase} for class {expl.target}" if spec.class_specific else spec.phrase
    count = last - start
    span = f"layer {last}" if count == 1 else f"layers {start + 1}-{last}"
    through = f"through {count} layer{'s' if count != 1 else ''}" + (f" ({span})" if start else "")
    name = expl.method if spec is None else spec.phrase
    if spec is not None and spec.class_specific:
        return f"{name} for class {expl.target} {through}"
    if spec is not None and not spec.uses_head_fusion:  # ALTI, norm-based, value zeroing: no head fusion to name
        return f"{name} {through}"
    return f"{name} {through}, {fusion}"


def _prediction_phrase(expl: ExplanationData) -> str:
    if not expl.prediction:
        return "The model has no classifier, so the map explains its output representation"
    top = expl.prediction[0]
    if expl.settings.get("task") == "causal-lm":
        return f"The next-token prediction {top.label!r} ({_percent(top.probability)})"
    if top.similarity is not None:
        return f"The closest zero-shot label {top.label} (cosine similarity {top.similarity:.2f})"
    return f"The prediction {top.label} ({_percent(top.probability)})"


def _units(expl: ExplanationData, scores: np.ndarray) -> tuple[list[str], np.ndarray, str]:
    """Words of the text (subwords merged by offsets) or, without offsets, the shown tokens."""
    if expl.text is not None and expl.offsets is not None:
        merged = word_scores(expl, scores)
        if merged:
            return [w for w, *_ in merged], np.array([v for *_, v in merged]), "words"
    return expl.display_tokens(), expl.display_scores(scores), "tokens"


def _positive_shares(values: np.ndarray) -> tuple[np.ndarray, bool]:
    """Shares of the positive evidence: a signed map (AttnLRP, gradients x input) keeps its positive part,
    renormalised, so no share exceeds 100%; True when the map was signed."""
    values = np.asarray(values, dtype=np.float64)
    if not (values < 0).any():
        return values, False
    positive = np.clip(values, 0.0, None)
    total = positive.sum()
    return (positive / total if total > 0 else positive), True


def _signed_listing(names: list[str], values: np.ndarray, order: np.ndarray, top_k: int) -> str:
    """'great' (+31%) and 'fun' (+12%): the first `top_k` of `order` with their signed shares."""
    named = [f"{names[i]!r} ({'+' if values[i] >= 0 else '−'}{_percent(abs(values[i]))})" for i in order[:top_k]]
    return named[0] if len(named) == 1 else ", ".join(named[:-1]) + " and " + named[-1]


def _signed_text_body(expl: ExplanationData, units: list[str], shares: np.ndarray, lead: str, unit: str,
                      top_k: int) -> str:
    """A signed map (evidence for and against, as shares of its total size): what speaks for the class, what
    against it, and how much of the evidence is against."""
    if len(units) == 0 or not np.abs(shares).sum() > 0:
        return f"{lead} gives no shown {unit[:-1]} a non-zero score."
    against = float(np.abs(shares[shares < 0]).sum())
    pro = [i for i in np.argsort(-shares, kind="stable") if shares[i] > 0]
    con = [i for i in np.argsort(shares, kind="stable") if shares[i] < 0]
    parts = []
    if pro:
        verb = "speaks" if len(pro[:top_k]) == 1 else "speak"
        parts.append(f"{_signed_listing(units, shares, np.array(pro), top_k)} {verb} for it")
    if con:
        parts.append(f"{_signed_listing(units, shares, np.array(con), top_k)} against it")
    tail = f"{_percent(against)} of the evidence argues against" if against > 0 else "nothing argues against it"
    return (f"{lead} (signed: shares of the evidence for and against, of {len(units)} {unit}): "
            f"{'; '.join(parts)}; {tail}.")


def _text_body(expl: ExplanationData, scores: np.ndarray, lead: str, top_k: int) -> str:
    units, shares, unit = _units(expl, scores)
    if expl.signed:
        return _signed_text_body(expl, units, shares, lead, unit, top_k)
    shares, signed = _positive_shares(shares)
    lead = f"{lead} (shares of its positive relevance)" if signed else lead
    if len(units) == 0 or shares.sum() <= 0:
        return f"{lead} gives no shown token a non-zero score."
    order = np.argsort(-shares, kind="stable")
    uniform = 1.0 / len(units)
    best = order[0]
    if shares[best] < FLAT_RATIO * uniform:
        return (f"{lead} is nearly flat: the largest share, {units[best]!r} ({_percent(shares[best])}), is barely "
                f"above the uniform share of {_percent(uniform)} (1/{len(units)} {unit}), so no word stands out.")
    picked = [i for i in order[: max(1, top_k)] if shares[i] > uniform]
    named = [f"{units[i]!r} ({_percent(shares[i])})" for i in picked]
    listing = named[0] if len(named) == 1 else ", ".join(named[:-1]) + " and " + named[-1]
    together = float(shares[picked].sum())
    verb = "rests mostly on" if together >= 0.5 else "gives its largest shares to"
    tail = f" (together {_percent(together)})" if len(picked) > 1 else ""
    return f"{lead} {verb} {listing}{tail}, of {len(units)} {unit} (uniform share {_percent(uniform)})."


def _quarters(score_map: np.ndarray) -> dict[str, float]:
    """Mass in each quarter; with an odd grid the middle row/column is split half and half."""
    rows, cols = score_map.shape
    top = np.clip(rows / 2 - np.arange(rows), 0.0, 1.0)
    left = np.clip(cols / 2 - np.arange(cols), 0.0, 1.0)
    out = {}
    for vname, v in (("top", top), ("bottom", 1 - top)):
        for hname, h in (("left", left), ("right", 1 - left)):
            out[f"{vname}-{hname}"] = float(v @ score_map @ h)
    return out


def _image_body(expl: ExplanationData, scores: np.ndarray, lead: str) -> str:
    if expl.signed:
        values = expl.score_map(scores)
        if not np.abs(values).sum() > 0:
            return f"{lead} gives no patch a non-zero score."
        cols = values.shape[1]
        flat = values.ravel()
        pro, con = int(np.argmax(flat)), int(np.argmin(flat))
        found = [f"the evidence for it peaks at patch (row {pro // cols}, col {pro % cols}) (+{_percent(flat[pro])})"
                 if flat[pro] > 0 else "no patch speaks for it"]
        if flat[con] < 0:
            found.append(f"the strongest against it is patch (row {con // cols}, col {con % cols}) "
                         f"(−{_percent(-flat[con])})")
        return (f"{lead} (signed: shares of the evidence for and against): {'; '.join(found)}; "
                f"{_percent(float(np.abs(flat[flat < 0]).sum()))} of the evidence argues against.")
    score_map, signed = _positive_shares(expl.score_map(scores))
    lead = f"{lead} (shares of its positive relevance)" if signed else lead
    rows, cols = score_map.shape
    flat = np.sort(score_map.ravel())[::-1]
    if flat.sum() <= 0:
        return f"{lead} gives no patch a non-zero score."
    uniform = 1.0 / flat.size
    top_count = max(1, int(round(0.1 * flat.size)))
    top_share = float(flat[:top_count].sum())
    quarters = _quarters(score_map)
    best = max(quarters, key=quarters.get)
    r, c = np.unravel_index(int(np.argmax(score_map)), score_map.shape)
    mass = (f"the top 10% of the {rows}x{cols} patches ({top_count}) hold {_percent(top_share)} of the mass "
            f"(uniform would be {_percent(top_count / flat.size)})")
    if flat[0] < FLAT_RATIO * uniform:
        return (f"{lead} is nearly flat: the largest patch share, {_percent(flat[0])}, is barely above the uniform "
                f"share of {_percent(uniform)}; {mass}.")
    where = (f"the {best} quarter holds the most ({_percent(quarters[best])})" if quarters[best] >= 0.4
             else f"no quarter stands out (the largest, {best}, holds {_percent(quarters[best])})")
    # 0-based, as on the figures' axes, in their hover text and in the CLI
    return f"{lead} peaks at patch (row {r}, col {c}) ({_percent(flat[0])}); {mass}; {where}."
