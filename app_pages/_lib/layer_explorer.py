"""The layer slider and the views it drives, switched in the browser.

Every slider position is sent with the page as numbers (`rollout_core.figures.layer_views`); the component
(rollout_core/figures/layer_explorer.js, shared with the standalone HTML file; here a Streamlit v2 component
mounted in the page, not an iframe) colours and draws each move without a server round trip, then
reports the chosen position (debounced) so the URL and the server-side views that follow the layer (the
per-head grid) catch up. plotly.js is served by Streamlit's static file serving from `static/` beside app.py
(copied there from the installed plotly package).
"""
from __future__ import annotations

import functools
import hashlib
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any, Callable, Sequence

import streamlit as st

from app_pages._lib import core
from app_pages._lib.safe import safe_text
from app_pages._lib.state import param
from rollout_core.explanation import Explanation
from rollout_core.figures import layer_views
from rollout_core.figures._common import one_map, raw_label, raw_slider_label, slider_label
from rollout_core.figures.explorer_payload import ExplorerData, Payload
from rollout_core.figures.standalone import explorer_asset

ROOT = Path(__file__).resolve().parents[2]
STATIC_PLOTLY = ROOT / "static" / "plotly.min.js"
SHARED_LABEL = "One colour scale for all layers"
SHARED_HELP = ("Off (default): each layer is coloured from 0 to its own largest value (shown on its legend), so a "
               "faint late layer stays visible. On: every layer of a mode on one scale, to compare their strength.")


def shared_scale_toggle() -> bool:
    """The URL-backed "one colour scale for all layers" checkbox; its value."""
    param("shared_scale", False)
    return bool(st.checkbox(SHARED_LABEL, key="shared_scale", help=SHARED_HELP))

_COMPONENT = st.components.v2.component(
    "rollout_layer_explorer",
    js=explorer_asset("js"),
    css=explorer_asset("css"),
    isolate_styles=False,  # Plotly puts its stylesheet in the document head; a shadow root would not see it
)


def served_plotly_js() -> str:
    """Copy plotly.js from the installed plotly package into static/ when missing or different; return its URL."""
    import plotly

    source = Path(plotly.__file__).parent / "package_data" / "plotly.min.js"
    if not STATIC_PLOTLY.is_file() or STATIC_PLOTLY.stat().st_size != source.stat().st_size:
        STATIC_PLOTLY.parent.mkdir(exist_ok=True)
        # a copy of its own: two server processes (or test workers) may copy at once, and one's rename must not
        # move or cut the other's half-written file
        handle, partial = tempfile.mkstemp(suffix=".partial", dir=STATIC_PLOTLY.parent)
        os.close(handle)
        shutil.copyfile(source, partial)
        os.chmod(partial, 0o644)
        os.replace(partial, STATIC_PLOTLY)
    base = (st.get_option("server.baseUrlPath") or "").strip("/")
    return "/" + "/".join(part for part in (base, "app/static", STATIC_PLOTLY.name) if part)


def _fingerprint(expl: Explanation) -> str:
    """What an explanation's views depend on, hashed: scores of every layer, tokens, text, image, method."""
    digest = hashlib.sha256()
    for array in (expl.layer_scores, expl.layer_attention_scores, expl.image):
        if array is not None:
            digest.update(memoryview(array.tobytes()))
    digest.update(repr((expl.tokens, expl.text, expl.method, expl.model_name, expl.settings)).encode("utf-8"))
    return digest.hexdigest()


def _cached(build: Callable[..., Payload]) -> Callable[..., Payload]:
    """`build` through the pages' byte-bounded result cache, keyed on its arguments (explanations by content)."""

    def payload(*args: Any, **kwargs: Any) -> Payload:
        key = (build.__name__, *(_fingerprint(a) if isinstance(a, Explanation) else a for a in args),
               *sorted(kwargs.items()))
        return core.results().get_or_compute(key, lambda: build(*args, **kwargs))

    return functools.wraps(build)(payload)


@_cached
def text_payload(expl: Explanation, shared_scale: bool = False, level: str = "word") -> Payload:
    return layer_views.text_payload(expl, shared_scale=shared_scale, level=level)


def token_toggle() -> str:
    """The URL-backed "word pieces" checkbox: the highlight and bars per token instead of per word."""
    param("tokens", False)
    tokens = st.checkbox("Word pieces (tokens)", key="tokens",
                         help="Off (default): one value per word, its pieces' shares summed, as the summary names "
                              "them. On: the tokenizer's own pieces (e.g. 'crush' + 'es'), each with its share.")
    return "token" if tokens else "word"


@_cached
def image_payload(expl: Explanation, colormap: str, shared_scale: bool = False) -> Payload:
    """Overlay views sent once; their opacity is a control switched in the browser (OVERLAY_OPACITY)."""
    return layer_views.image_payload(expl, colormap=colormap, shared_scale=shared_scale)


@_cached
def comparison_payload(a: Explanation, b: Explanation, sides: str = "shared", shared_scale: bool = False,
                       colormap: str = layer_views.DEFAULT_COLORMAP) -> Payload:
    return layer_views.comparison_payload(a, b, sides=sides, shared_scale=shared_scale, colormap=colormap)


def layer_explorer(payload: Payload, shown: Sequence[Explanation], key: str = "layer",
                   controls: dict[layer_views.TraceControl, float] | None = None) -> tuple[int, bool]:
    """Mount the explorer on `payload` (from one of the *_payload functions, of the explanations `shown`);
    return the (slider position, raw) it shows. The methods shown name the slider (`slider_label`: "cumulative"
    only when they accumulate) and the raw-view toggle (`raw_label`: their own attention, or contributions for
    ALTI, norm-based and value zeroing); the slider covers the deepest explanation's layers.

    The view is final unless the user chose a layer: the position lives in session state under `key` and
    `{key}_raw` (URL settings), so it survives a new input, a reload and a shared link that names it, and goes
    back to the last layer (cumulative) when the models, methods, modality or depths shown change (`identity`).
    So does each of `controls` (control -> default value), under its key."""
    num_layers = max(e.num_layers for e in shown)
    methods = tuple(e.method for e in shown)
    layer = int(param(key, num_layers))
    raw = bool(param(f"{key}_raw", False))
    identity = _identity(shown)
    seen = _seen(key)
    if st.session_state.get(seen, identity) != identity:
        st.session_state[key], st.session_state[f"{key}_raw"] = layer, raw = num_layers, False
    st.session_state[seen] = identity
    controls = controls or {}
    specs = [control.spec(param(control.key, default, low=control.low, high=control.high))
             for control, default in controls.items()]
    if not 1 <= layer <= num_layers:
        st.session_state[key] = layer = num_layers
    plotly_url = ""
    if not st.get_option("server.enableStaticServing"):
        st.warning("Static file serving is off, so the figures under the layer slider cannot be drawn (the "
                   "highlight and summary still follow it). Start the app from the repository folder, whose "
                   ".streamlit/config.toml turns it on, or add `--server.enableStaticServing true`.")
    else:
        try:
            plotly_url = served_plotly_js()
        except OSError as err:
            st.warning(f"plotly.js could not be copied into {safe_text(STATIC_PLOTLY.parent)} ({safe_text(err)}), "
                       "so the figures under the layer slider cannot be drawn (the highlight and summary still follow "
                       "it).")
    data: ExplorerData = {"payload": payload, "layers": num_layers, "layer": layer, "raw": raw,
                          "label": slider_label(*methods), "raw_slider_label": raw_slider_label(*methods),
                          "raw_label": raw_label(*methods),
                          "one_map": one_map(*methods), "plotly_url": plotly_url, "controls": specs,
                          "identity": identity,
                          "url": {"layer": key, "raw": f"{key}_raw",
                                  "defaults": {c.key: float(d) for c, d in controls.items()}}}
    _COMPONENT(key=f"{key}_explorer", data=data,
               on_view_change=_follow(key, num_layers, tuple(controls)))
    return int(st.session_state[key]), bool(st.session_state[f"{key}_raw"])


def _identity(shown: Sequence[Explanation]) -> str:
    """What a slider position means: the kind, model, method and layer range of each explanation shown."""
    return repr([(e.kind, e.model_name, e.method, e.settings.get("start_layer"), e.num_layers) for e in shown])


def _seen(key: str) -> str:
    """Session key of the identity the explorer under `key` was last drawn for."""
    return f"_{key}_identity"


def _follow(key: str, num_layers: int, controls: tuple[layer_views.TraceControl, ...]) -> Callable[[], None]:
    """Callback: copy the position and control values the browser reports into the URL-backed settings.

    A position is taken only when reported for the identity drawn last: the browser reports a move a moment
    later (debounced), as a rerun of the explorer's fragment, which Streamlit runs after a rerun already under
    way. So a move made just before another method was chosen is reported after that method's run has reset
    the view, and would put the new method's final map back at the layer chosen for the old one."""

    def follow() -> None:
        view = (st.session_state.get(f"{key}_explorer") or {}).get("view") or {}
        layer = view.get("layer")
        current = view.get("identity") == st.session_state.get(_seen(key))
        if current and isinstance(layer, int) and 1 <= layer <= num_layers:
            st.session_state[key] = layer
        if current and isinstance(view.get("raw"), bool):
            st.session_state[f"{key}_raw"] = view["raw"]
        reported = view.get("controls") or {}
        for control in controls:
            value = reported.get(control.key)
            if isinstance(value, (int, float)) and control.low <= value <= control.high:
                st.session_state[control.key] = float(value)

    return follow
