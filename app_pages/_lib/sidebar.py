"""The sidebar every page shares: model picker and method settings, all kept in the URL."""
from __future__ import annotations

from typing import Any

import streamlit as st

from app_pages._lib.safe import safe_text
from app_pages._lib.state import param
from rollout_core import methods
from rollout_core.errors import RolloutError
from rollout_core.models import measured, registry
from rollout_core.options import HEAD_FUSIONS, Options

OTHER = "other"
FUSIONS = HEAD_FUSIONS


def model_picker(modality: str, key: str = "model", label: str = "Model") -> tuple[str, bool]:
    """Registry models of `modality` (embedded first), or any hub id / local folder. Returns (name, allow_pickle)."""
    entries = {e.name: e for e in registry.list_models(modality)}
    value = param(key, registry.DEFAULTS[modality])
    choice_key, custom_key = f"{key}_choice", f"{key}_custom"
    if choice_key not in st.session_state:
        st.session_state[choice_key] = value if value in entries else OTHER
        st.session_state[custom_key] = "" if value in entries else value

    def describe(name: str) -> str:
        if name == OTHER:
            return "Any hub id or local folder…"
        entry = entries[name]
        where = "embedded" if entry.embedded else "hub"
        if entry.embedded and not registry.is_available(entry):
            where = "not built yet"
        return f"{name} ({where})"

    choice = st.selectbox(label, [*entries, OTHER], key=choice_key, format_func=describe)
    if choice == OTHER:
        name = st.text_input("Hub id or local folder", key=custom_key,
                             placeholder="e.g. google/vit-base-patch16-224 or /models/my-vit").strip()
    else:
        name = choice
        entry = entries[choice]
        st.caption(entry.description)
        if entry.embedded and not registry.is_available(entry):
            st.caption(f"Build it first: {registry.SETUP_HINT}.")
    st.session_state[key] = name
    param(f"{key}_pickle", False, from_url=False)  # lowers safety: never from a link
    allow_pickle = st.checkbox("Allow pickle weights (.bin/.pt)", key=f"{key}_pickle")
    if allow_pickle:
        st.warning("Pickle files can run arbitrary code when loaded. Only allow this for models you trust; "
                   "safetensors weights are always preferred.")
    return name, allow_pickle


def method_settings(key: str = "", target_help: str | None = None, model: str | None = None,
                    modality: str | None = None, handle: Any = None, zero_shot: bool = False,
                    ) -> tuple[Options, str | int | None]:
    """Method, head fusion, residual weight, discard ratio, start layer (the `Options`) and the target (None:
    predicted); `key` prefixes the URL names. With `model`, the picker starts on its measured default and shows
    each method's measured figures. With the loaded `handle`, it offers only the methods that can run on it
    (`methods.runnable`; `zero_shot`: the page gives zero-shot labels), else those of `modality`."""
    k = (lambda name: f"{key}{name}") if key else (lambda name: name)
    record = measured.figures(model)
    if handle is not None:
        offered = [s.name for s in methods.runnable(handle, zero_shot=zero_shot)]
    else:
        offered = [m for m in methods.names() if modality is None or modality in methods.get(m).modalities]
    default = measured.default_method(model, methods.names())
    default = default if default in offered else offered[0]
    for name, first, choices in (("method", default, offered), ("fusion", "mean", FUSIONS)):
        param(k(name), first, choices)
    chosen_for, model_key = st.session_state.get(f"_{k('method')}_model"), f"_{k('method')}_model"
    if chosen_for is not None and chosen_for != model:  # another model or modality: its own measured default
        st.session_state[k("method")] = default
    st.session_state[model_key] = model
    stale = st.session_state[k("method")]
    if stale not in offered:  # chosen for another model or input: say why it is not offered here
        why = methods.get(stale).refusal(handle, zero_shot=zero_shot) if handle is not None else None
        st.caption(safe_text(f"{methods.display_name(stale)} cannot run here" + (f": {why}." if why else ".")))
        st.session_state[k("method")] = default
    method = st.selectbox("Method", offered, key=k("method"),
                          format_func=lambda m: method_label(m, record))
    _figures_caption(record, model, handle)
    spec = methods.get(method)
    fusion = st.selectbox("Head fusion", FUSIONS, key=k("fusion"), disabled=not spec.uses_head_fusion,
                          help="How the heads of a layer are combined (gradient rollout weights heads itself).")
    param(k("residual"), 1.0, low=0.0, high=3.0)
    residual = st.slider("Residual weight", 0.0, 3.0, step=0.1, key=k("residual"), disabled=not spec.uses_residual,
                         help="Ã = rownorm(A + w·I); w = 1 is the paper's 0.5·A + 0.5·I, w = 0 raw products.")
    param(k("discard"), 0.0, low=0.0, high=0.95)
    discard = st.slider("Discard ratio", 0.0, 0.95, step=0.05, key=k("discard"),
                        help="Zero this fraction of the lowest fused attention before the residual (vit-explain).")
    param(k("start"), 0, low=0, high=100)
    start = st.number_input("Start layer", min_value=0, max_value=100, step=1, key=k("start"),
                            help="Roll out from this layer (0 = the first).")
    if spec.first_layer is not None:
        st.caption(f"{spec.title} starts at the model's first fine-tuned layer: a lower start layer is raised to it.")
    param(k("target"), "")
    target = st.text_input("Target", key=k("target"),
                           help=target_help or "Class to explain (gradient rollout; a label or its index), or the "
                           "position whose next-token prediction is explained (language models). Empty = predicted.")
    return Options(method=method, head_fusion=fusion, residual_weight=float(residual), discard_ratio=float(discard),
                   start_layer=int(start)), _target(target)


def model_and_method(modality: str, method_header: str = "Method", zero_shot: bool = False,
                     ) -> tuple[str, bool, Options, str | int | None]:
    """The sidebar of a one-model page: the model picker and the method settings under their headers (offering
    the methods that can run on the model; `zero_shot`: the page gives a sentence encoder zero-shot labels).
    Returns (name, allow_pickle, options, target)."""
    with st.sidebar:
        st.header("Model")
        name, allow_pickle = model_picker(modality)
        st.header(method_header)
        return name, allow_pickle, *method_settings(model=name, modality=modality,
                                                    handle=loaded(name, allow_pickle), zero_shot=zero_shot)


def loaded(name: str, allow_pickle: bool) -> Any:
    """The model's handle for the pickers, or None when it does not load (the page shows why)."""
    from app_pages._lib import core

    if not name:
        return None
    try:
        return core.load(name, allow_pickle)
    except RolloutError:
        return None


def method_label(method: str, record: dict | None) -> str:
    """'Gradient rollout · pointing 0.88 · deletion 0.52' (the title alone when `method` was not measured)."""
    title = methods.get(method).title
    values = (record or {}).get("methods", {}).get(method)
    if not isinstance(values, dict):
        return title
    parts = [f"{word} {values[m]:.2f}" for word, m in FIGURE_WORDS if isinstance(values.get(m), (int, float))]
    return " · ".join([title, *parts])


FIGURE_WORDS = (("pointing", "pointing_game"), ("deletion", "deletion_auc"), ("lift", "mass_lift"))
"""The measures a picker shows beside a method, in words."""
RANKING_WORDS = {"pointing_game": "pointing", "deletion_auc": "deletion", "mass_lift": "mass lift on the object"}


NO_PREDICTION = ("image-backbone", "text-encoder")
"""Tasks without a prediction whose probability the "Check this map" button could follow."""


def _figures_caption(record: dict | None, model: str | None, handle: Any = None) -> None:
    if record is None:
        if model and (handle is None or handle.task not in NO_PREDICTION):
            st.caption("No measured figures for this model: “Check this map” under the map compares its deletion "
                       "curve with random orderings on the current input.")
        elif model:
            st.caption("No measured figures for this model (and no prediction a check could follow).")
        return
    chance = record.get("random") or {}
    against = " · ".join(f"{word} {chance[m]:.2f}" for word, m in FIGURE_WORDS
                         if isinstance(chance.get(m), (int, float)))
    where = safe_text(f"{measured.describe_dataset(record, long=False)}, {record.get('date', '?')}")
    shown = [m for _, m in FIGURE_WORDS if any(isinstance(v, dict) and isinstance(v.get(m), (int, float))
                                               for v in record.get("methods", {}).values())]
    meaning = {"pointing_game": "pointing game ↑ (top position on the deciding region)",
               "deletion_auc": "deletion AUC ↓", "mass_lift": "mass lift ↑ (share on the object over a flat map's)"}
    best_on = ", then ".join(RANKING_WORDS.get(m, m) for m, _ in measured.ranked_by(record))
    st.caption(f"Figures measured on {where}: {', '.join(meaning[m] for m in shown)}. Random: {against}. "
               f"Default: {methods.get(measured.default_method(model, methods.names())).title}, the best on {best_on}.")


def _target(raw: str) -> str | int | None:
    raw = raw.strip()
    if not raw:
        return None
    return int(raw) if raw.lstrip("-").isdigit() else raw
