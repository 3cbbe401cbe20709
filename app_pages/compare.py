"""Compare page: two models (or one model with two methods) on the same text or image."""
from __future__ import annotations

import functools

import streamlit as st

from app_pages._lib import core, views
from app_pages._lib.inputs import image_input, text_input
from app_pages._lib.layer_explorer import comparison_payload, layer_explorer, shared_scale_toggle
from app_pages._lib.safe import safe_text
from app_pages._lib.sidebar import loaded, method_settings, model_picker
from app_pages._lib.state import param, sync_url
from rollout_core import compare, methods
from rollout_core.explanation import Explanation
from rollout_core.figures.layer_views import DEFAULT_OPACITY, OVERLAY_OPACITY
from rollout_core.models import measured
from rollout_core.options import Options

MODES = {"models": "Two models, same method", "methods": "One model, two methods"}

st.title("Compare")
param("modality", "text", ("text", "image"))
param("mode", "methods", tuple(MODES))
top = st.columns(2)
modality = top[0].radio("Input", ["text", "image"], key="modality", horizontal=True, format_func=str.capitalize)
mode = top[1].radio("Compare", list(MODES), key="mode", horizontal=True, format_func=MODES.__getitem__)
if modality == "text":
    source = text_input()
    explain = core.explain_text
else:
    source = image_input().data
    explain = core.explain_image

with st.sidebar:
    st.header("Left (A)")
    name_a, pickle_a = model_picker(modality, key="model")
    if mode == "models":  # one method for both: only what runs on both models is offered
        st.header("Right (B)")
        name_b, pickle_b = model_picker(modality, key="model_b", label="Model B")
        st.header("Method (both sides)")
        method_a, target_a = method_settings(model=name_a, modality=modality, handle=loaded(name_a, pickle_a),
                                             also=(loaded(name_b, pickle_b),), source=source)
        method_b, target_b = method_a, target_a
    else:
        method_a, target_a = method_settings(model=name_a, modality=modality,  # starts on its measured default
                                             handle=loaded(name_a, pickle_a), source=source)
        st.header("Right (B)")
        name_b, pickle_b = name_a, pickle_a
        if "b_method" not in st.session_state and "b_method" not in st.query_params:
            # B starts on another method: plain rollout against the measured default (raw attention if that is it)
            default_a = measured.default_method(name_a, methods.names())
            st.session_state["b_method"] = "rollout" if default_a != "rollout" else "attention"
        method_b, target_b = method_settings(key="b_", model=name_b, modality=modality,
                                             handle=loaded(name_b, pickle_b), source=source)

side_requests = (("A", name_a, pickle_a, method_a, target_a), ("B", name_b, pickle_b, method_b, target_b))
method_keys = ("method", "method" if mode == "models" else "b_method")  # the sidebar's: a refusal's cheaper choice
fetches = [functools.partial(explain, name, allow_pickle, source, method, target, method_key=key)
           for (_, name, allow_pickle, method, target), key in zip(side_requests, method_keys)]


def explained(side: str, name: str, allow_pickle: bool, method: Options,
              fetch: functools.partial) -> Explanation | None:
    """One side's explanation (None after showing why there is none)."""
    if source is None or not core.run(f"loading {name or 'model ' + side}", core.load, name, allow_pickle):
        return None
    return core.run(f"explaining with {name} ({methods.display_name(method.method)}) for side {side}", fetch)


SIDES = {"shared": "One scale for both sides", "each": "Each side its own scale"}


@st.fragment
def layer_view(fetch_a: functools.partial, fetch_b: functools.partial) -> None:
    """Both sides, their agreement and difference at the slider's layer, switched in the browser."""
    a, b = (core.run(f"explaining side {side}", fetch) for side, fetch in zip("AB", (fetch_a, fetch_b)))
    if a is None or b is None:
        return
    if a.num_layers != b.num_layers:
        st.caption(f"A's map covers {a.num_layers} layers and B's {b.num_layers}: each position of the slider shows "
                   "each side at the same fraction of its own layers (the titles say which layer), and the last "
                   "position compares both final maps.")
    param("sides", "shared", tuple(SIDES))
    left, right = st.columns(2)
    sides = left.radio("Colour scale", list(SIDES), key="sides", horizontal=True, format_func=SIDES.__getitem__,
                       help="One scale: colours compare across the sides. Each its own: a side much fainter "
                            "than the other stays visible (its legend shows its range).")
    with right:
        shared = shared_scale_toggle()
    controls = {OVERLAY_OPACITY: DEFAULT_OPACITY} if a.kind == "image" else None
    layer_explorer(comparison_payload(a, b, sides, shared), (a, b), controls=controls)
    sync_url()


def show(a: Explanation | None, b: Explanation | None) -> None:
    """Both sides, how much they agree, and the layer view. The explanations are kept locals: the page's globals
    outlive the run (its fragment is a function of this script) in a closed tab's session, for
    server.disconnectedSessionTTL; the fragment re-fetches them through the cache (`fetches`)."""
    if a is None or b is None:
        return
    cols = st.columns(2)
    for col, exp, side in zip(cols, (a, b), "AB"):
        with col:
            st.markdown(f"**{side}: {safe_text(exp.model_name)}, {safe_text(methods.display_name(exp.method))}**")
            views.prediction(exp, f"Prediction ({side})")
    unreadable = [(side, e) for side, e in zip("AB", (a, b)) if e.not_meaningful]
    for side, e in unreadable:  # the method's own verdict: a map that cannot be read is neither drawn nor compared
        st.warning(f"No maps compared: side {side}'s {views.method_words(e)} is not meaningful on this input; "
                   "choose another method for that side.")
    if unreadable:
        return
    with core.guarded("comparing the two explanations"):
        result = compare.compare(a, b)
        if result.aligned_by_words:
            st.info("The two tokenizers split the text differently: scores were aligned onto words by "
                    "character offsets, and the comparison is per word.")
        if result.note:
            st.caption(safe_text(result.note))
        st.subheader("Layer by layer: both sides, their agreement and difference")
        layer_view(*fetches)


show(*(explained(side, name, allow_pickle, method, fetch)
       for (side, name, allow_pickle, method, _), fetch in zip(side_requests, fetches)))
sync_url()
