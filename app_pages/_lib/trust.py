"""How far to trust the map on screen: one line from the model's measured figures, or a check on request;
and, beside an image's out-of-domain note, the offer of the photo model."""
from __future__ import annotations

import hashlib
from typing import Any

import streamlit as st

from app_pages._lib import core
from app_pages._lib.safe import safe_text
from rollout_core import methods
from rollout_core.models import measured, registry
from rollout_core.reliability.image import OUT_OF_DOMAIN

PHOTO_MODEL = "dinov2-small"
_CHECKS = "trust_checks"


def trust_line(name: str, allow_pickle: bool, exp: Any, source: str | bytes) -> None:
    """One caption under the map: the measured pointing game of this method on this model, or a button that
    compares the current input's deletion curve with random orderings."""
    record = measured.figures(name)
    values = (record or {}).get("methods", {}).get(exp.method)
    if record is not None and isinstance(values, dict):
        st.caption(_measured_sentence(record, values, exp.kind, exp.method))
        return
    if not exp.prediction:
        st.caption("No measured figures for this model, and no classifier whose probability a check could follow.")
        return
    key = hashlib.sha256(repr((name, exp.method, exp.settings.get("target"), str(exp.settings),
                               source if isinstance(source, str) else hashlib.sha256(source).hexdigest()))
                         .encode()).hexdigest()
    checks = st.session_state.setdefault(_CHECKS, {})
    if key not in checks:
        why = "This method has no measured figures on this model." if record else \
            "This model has no measured figures."
        st.caption(f"{why} The check removes the map's top {'tokens' if exp.kind == 'text' else 'patches'} "
                   "first and follows the predicted class, against 10 random orderings.")
        if not st.button("Check this map", key="trust_check"):
            return
        result = core.run("removing the top positions first and at random", _check, name, allow_pickle, source, exp)
        if result is None:  # the error is on screen; the button comes back on the next run
            return
        checks[key] = result
    st.caption(checks[key])


def _measured_sentence(record: dict, values: dict, kind: str, method: str) -> str:
    where = safe_text(measured.describe_dataset(record))
    chance = (record.get("random") or {}).get("pointing_game")
    pointing = values.get("pointing_game")
    lift = values.get("mass_lift")
    if isinstance(lift, (int, float)):  # a study with object boxes (dinov2-small on photos)
        top = (f", and its top patch lies inside the box on {pointing:.0%} of them" if isinstance(pointing, float)
               else "")
        return (f"On {where}, this method puts {lift:.1f}x a flat map's share of its mass on the object{top} "
                "(a small study: a guide, not a guarantee).")
    if isinstance(pointing, (int, float)):
        top = "top token is a deciding word" if kind == "text" else "top patch lies on the deciding shape"
        tail = f"; random {chance:.0%}." if isinstance(chance, (int, float)) else "."
        return " ".join(filter(None, (f"On {where}, this method's {top} {pointing:.0%} of the time{tail}",
                                      _deletion_sentence(record, values, kind, method))))
    deletion, random = values.get("deletion_auc"), (record.get("random") or {}).get("deletion_auc")
    if isinstance(deletion, (int, float)) and isinstance(random, (int, float)):
        return (f"On {where}, removing this method's top positions first gives a deletion AUC of {deletion:.2f}; "
                f"random orderings {random:.2f} (lower: the map finds what the model uses).")
    return f"Measured on {where}; no pointing game or deletion figure for this method."


def _deletion_sentence(record: dict, values: dict, kind: str, method: str) -> str:
    """How fast removing the map's top positions lowers the prediction, beside integrated gradients (the
    attention-free reference, when the record has it) and random orderings; and, for a class-agnostic method,
    that the map does not say which way a position pushes."""
    deletion = values.get("deletion_auc")
    if not isinstance(deletion, (int, float)):
        return ""
    what = "tokens" if kind == "text" else "patches"
    ig = next(s.name for s in methods.all_methods() if s.agreement == "ig")  # the reference with completeness
    reference = {} if method == ig else (record.get("methods") or {}).get(ig)
    beside = ", ".join(f"{name} {v['deletion_auc']:.2f}" for name, v in
                       (("integrated gradients", reference or {}), ("random", record.get("random") or {}))
                       if isinstance(v.get("deletion_auc"), (int, float)))
    sentence = (f"Removing its top {what} first lowers the prediction with a deletion AUC of {deletion:.2f}"
                + (f" ({beside}; lower is faster)." if beside else " (lower is faster)."))
    spec = methods.get(method) if method in methods.names() else None
    if spec is not None and not spec.class_specific:
        sentence += (" It shows where information flows, not whether a position argues for or against the class"
                     + (" (a negation such as 'not' can decide without standing out)." if kind == "text" else "."))
    return sentence


def _check(name: str, allow_pickle: bool, source: str | bytes, exp: Any) -> str:
    from rollout_core.faithfulness.check import check_deletion

    result = check_deletion(core.load(name, allow_pickle), source, exp)
    verdict = "better than" if result.method_auc < result.random_auc - result.random_std else \
        "no better than" if result.method_auc >= result.random_auc else "barely better than"
    return safe_text(f"On this input, removing this map's top positions first gives a deletion AUC of "
                     f"{result.method_auc:.2f} for {result.label}; {result.seeds} random orderings "
                     f"{result.random_auc:.2f} ± {result.random_std:.2f}. Lower means the map finds what the model "
                     f"uses: {verdict} chance.")


def photo_model_offer(exp: Any) -> None:
    """Beside an out-of-domain note (an image far from a shapes model's training data, `Explanation.warnings`),
    a button that switches to the photo model when it is built."""
    if not any(note.startswith(OUT_OF_DOMAIN) for note in exp.warnings):
        return
    entry = registry.lookup(PHOTO_MODEL)
    if entry is not None and registry.is_available(entry):
        st.button(f"Switch to {PHOTO_MODEL} (pretrained on photos)", key="switch_photo_model",
                  on_click=_switch_model, args=(PHOTO_MODEL,))


def _switch_model(name: str) -> None:
    """Before the rerun: point the sidebar's model picker at `name` (widget state may change only here)."""
    st.session_state["model_choice"] = name
    st.session_state["model"] = name
    st.session_state["method"] = measured.default_method(name, methods.names())
