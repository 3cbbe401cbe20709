"""The sidebar every page shares: model picker and method settings, all kept in the URL."""
from __future__ import annotations

from typing import Any

import streamlit as st

from app_pages._lib.safe import safe_text
from app_pages._lib.state import param
from rollout_core import methods
from rollout_core.errors import RolloutError
from rollout_core.models import measured, registry
from rollout_core.options import OPTIONS, SPECS, Options, OptionSpec

OTHER = "other"


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
                    also: tuple[Any, ...] = (), source: Any = None) -> tuple[Options, str | int | None]:
    """Method, head fusion, residual weight, discard ratio, start layer (the `Options`) and the target (None:
    predicted); `key` prefixes the URL names. With `model`, the picker starts on its measured default and shows
    each method's measured figures. With the loaded `handle`, it offers only the methods that can run on it
    (`methods.runnable`; `zero_shot`: the page gives zero-shot labels), else those of `modality`; `also`: other
    loaded handles the same method runs on (Compare's two models), whose runnable methods it is narrowed to.
    With `source` (the page's text or image) and `handle`, the chosen method's estimate on it is said under the
    picker, before anything runs."""
    k = (lambda name: f"{key}{name}") if key else (lambda name: name)
    record = measured.figures(model)
    if handle is not None:
        offered = [s.name for s in methods.runnable(handle, zero_shot=zero_shot)]
        for other in (h for h in also if h is not None):
            offered = [m for m in offered if m in {s.name for s in methods.runnable(other)}] or offered
    else:
        offered = [m for m in methods.names() if modality is None or modality in methods.get(m).modalities]
    default = measured.default_method(model, methods.names())
    default = default if default in offered else offered[0]
    method_option = SPECS["method"]
    param(k(method_option.url), default, tuple(methods.names()))  # a method that cannot run here: said below why
    chosen_for, model_key = st.session_state.get(f"_{k('method')}_model"), f"_{k('method')}_model"
    if chosen_for is not None and chosen_for != model:  # another model or modality: its own measured default
        st.session_state[k("method")] = default
    st.session_state[model_key] = model
    stale = st.session_state[k("method")]
    if stale not in offered:  # chosen for another model or input: say why it is not offered here
        why = next((w for h in (handle, *also) if h is not None
                    for w in [methods.get(stale).refusal(h, zero_shot=zero_shot and h is handle)] if w), None)
        st.caption(safe_text(f"{methods.display_name(stale)} cannot run here" + (f": {why}." if why else ".")))
        st.session_state[k("method")] = default
    method = st.selectbox(method_option.label, offered, key=k("method"),
                          format_func=lambda m: method_label(m, record))
    estimate = st.empty()  # filled once the options it depends on (the start layer) are read
    _figures_caption(record, model, handle)
    spec = methods.get(method)
    values = {o.name: option_widget(o, k(o.url), spec, None if handle is None else handle.num_layers,
                                    target_help) for o in SIDEBAR_OPTIONS}
    handles = tuple(h for h in (handle, *also) if h is not None)
    if handle is not None and source is not None and all(h.modality == handle.modality for h in handles) and (
            isinstance(source, bytes) == (handle.modality == "image")):
        _estimate_caption(estimate, handles, source, method, values["start_layer"], values["discard_ratio"] > 0)
    if spec.first_layer is not None:
        st.caption(f"{spec.title} starts at the model's first fine-tuned layer: a lower start layer is raised to it.")
    target = values.pop("target")
    return Options(method=method, **values), _target(target)


def _estimate_caption(slot: Any, handles: tuple[Any, ...], source: Any, method: str, start_layer: int,
                      discard: bool) -> None:
    """The budget's estimate of `method` on `source` with `handles` (`budget.before_run`) in `slot`; nothing when
    the input cannot be read (the page says why)."""
    from app_pages._lib import core
    from rollout_core.serving import budget

    try:
        sizes = tuple(core.positions(h, source) for h in handles)
    except RolloutError:
        return
    slot.caption(safe_text(budget.before_run(handles, sizes, method, start_layer, discard=discard)))


SIDEBAR_OPTIONS = tuple(o for o in OPTIONS if o.url is not None and o.kind != "method")
"""The options the sidebar draws a widget for, from the options table (the method picker is drawn above them)."""
UNLOADED_LAYERS = 101
"""The layer range offered while the model is not loaded (nothing is explained then)."""


def option_widget(option: OptionSpec, key: str, spec: Any, layers: int | None, target_help: str | None = None) -> Any:
    """The sidebar widget of one option of `options.OPTIONS`, its range the table's (layers: the model's
    `layers`), kept in the URL under `key`; disabled when the method `spec` does not read it. Returns its value."""
    help_text = option.full_help()[0].upper() + option.full_help()[1:] + "."
    disabled = option.uses is not None and not getattr(spec, option.uses)
    if option.kind == "choice":
        param(key, option.default, option.choices)
        return st.selectbox(option.label, option.choices, key=key, disabled=disabled, help=help_text)
    if option.kind == "number":
        param(key, option.default, low=option.low, high=option.high)
        return float(st.slider(option.label, option.low, option.high, step=option.step, key=key, disabled=disabled,
                               help=help_text))
    if option.kind == "layer":
        low, high = option.layer_bounds(UNLOADED_LAYERS if layers is None else layers)
        param(key, option.default, low=low, high=high)
        if not low <= st.session_state[key] <= high:  # chosen for a model with more layers
            st.caption(f"{option.label} {st.session_state[key]} is beyond this model's {layers} layers; "
                       f"{high} is used.")
            st.session_state[key] = min(max(st.session_state[key], low), high)
        return int(st.number_input(option.label, min_value=low, max_value=high, step=1, key=key, disabled=disabled,
                                   help=help_text))
    param(key, "")
    return st.text_input(option.label, key=key, help=target_help or help_text)


def model_and_method(modality: str, method_header: str = "Method", zero_shot: bool = False, source: Any = None,
                     ) -> tuple[str, bool, Options, str | int | None]:
    """The sidebar of a one-model page: the model picker and the method settings under their headers (offering
    the methods that can run on the model; `zero_shot`: the page gives a sentence encoder zero-shot labels;
    `source`: the page's input, on which the chosen method's estimate is said). Returns (name, allow_pickle,
    options, target)."""
    with st.sidebar:
        st.header("Model")
        name, allow_pickle = model_picker(modality)
        st.header(method_header)
        return name, allow_pickle, *method_settings(model=name, modality=modality, handle=loaded(name, allow_pickle),
                                                    zero_shot=zero_shot, source=source)


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
