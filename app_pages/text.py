"""Text page: explain one sentence with the chosen model and method."""
from __future__ import annotations

import functools

import streamlit as st

from app_pages._lib import core, views
from app_pages._lib.inputs import text_input
from app_pages._lib.layer_explorer import layer_explorer, shared_scale_toggle, text_payload, token_toggle
from app_pages._lib.safe import safe_text
from app_pages._lib.sidebar import model_and_method
from app_pages._lib.trust import trust_line
from app_pages._lib.state import param, sync_url
from rollout_core import figures, methods
from rollout_core.figures._common import layer_words
from rollout_core.data.sentiment import EXAMPLE_SENTENCES
from rollout_core.explanation import Explanation

st.title("Text")


def _use_example() -> None:
    st.session_state["text"] = st.session_state["example"]


st.selectbox("Example sentences", EXAMPLE_SENTENCES, key="example", index=None, placeholder="Pick an example…",
             on_change=_use_example)
text = text_input("Text to explain", height=90)
name, allow_pickle, method, target = model_and_method("text", zero_shot=True, source=text)

handle = core.run(f"loading {name or 'the model'}", core.load, name, allow_pickle)
labels: tuple[str, ...] | None = None
if handle is not None and handle.task == "sentence-encoder":
    param("labels", "positive, negative")
    raw_labels = st.text_input("Zero-shot labels (comma separated)", key="labels",
                               help="The prediction is the label whose embedding is most similar to the text's.")
    labels = tuple(label.strip() for label in raw_labels.split(",") if label.strip()) or None

# Every head's attention is kept only while the head panel is open.
request = (name, allow_pickle, text, method, target, labels)
param("heads_open", False)
fetch = functools.partial(core.explain_text, *request, keep_heads=bool(st.session_state["heads_open"]))


@st.fragment
def layer_view(request: tuple, specials: str) -> None:
    """The layer slider with the highlight, summary and bars it drives (switched in the browser), and the
    per-head grid of the chosen layer (drawn here when open: it follows the slider after a short pause)."""
    fetch = functools.partial(core.explain_text, *request, keep_heads=bool(st.session_state["heads_open"]))
    exp = core.run("explaining the text", fetch)
    if exp is None:
        return
    scale_col, level_col = st.columns(2)
    with scale_col:
        shared = shared_scale_toggle()
    with level_col:
        level = token_toggle() if exp.offsets is not None else "token"  # words need the tokens' character spans
    layer, raw = layer_explorer(text_payload(exp, shared, level), (exp,))
    index = views.layer_index(layer)
    st.caption("Downloads of the layer on screen:")
    views.downloads(fetch, exp.kind, {"Bar chart": lambda e: figures.score_bar(e, layer=index, raw_attention=raw,
                                                                               level=level)},
                    key="text", stem=views.download_stem(exp, exp.text), view=dict(layer=index, raw_attention=raw))
    param("heads_open", False)
    heads = st.expander("Every head of this layer", key="heads_open", on_change="rerun")
    if heads.open:  # drawn only while open: the grid is the heaviest figure
        with heads:
            st.caption(f"{layer_words(exp, views.layer_index(layer)).capitalize()}.")
            head_view(exp, views.layer_index(layer), specials)
    sync_url()


def head_view(exp: object, index: int, specials: str) -> None:
    """Every head of the layer on one scale, and one head enlarged."""
    if exp.head_attention is None:
        st.caption("Per-head attention was not kept for this explanation.")
        return
    st.plotly_chart(figures.head_grid(exp, index, specials=specials), key="heads")
    count = exp.head_attention.shape[1]
    chosen = param("head", 0, low=0, high=count)  # in the URL 1-based, 0 = none enlarged
    if "head_pick" not in st.session_state or (st.session_state["head_pick"] or 0) >= count:
        st.session_state["head_pick"] = chosen - 1 if 0 < chosen <= count else None
    head = st.pills("Enlarge a head", list(range(count)), key="head_pick", format_func=lambda h: f"head {h + 1}")
    st.session_state["head"] = 0 if head is None else head + 1
    if head is not None:
        st.plotly_chart(figures.matrix_heatmap(exp, layer=index, head=head, specials=specials), key="head_big")


def show(exp: Explanation | None) -> None:
    """Everything drawn from the explanation. The explanation is kept a local, never a global of this page: the
    page's globals outlive the run (its fragment and download makers are functions of this script), and Streamlit
    keeps a closed tab's session for server.disconnectedSessionTTL. The fragment and the makers re-fetch it
    through the cache instead (`request`, `fetch`)."""
    if exp is None:
        return
    param("hide_special", True)
    specials = "hide" if st.session_state["hide_special"] else "grey"
    left, right = st.columns([1, 2])
    with left:
        views.prediction(exp, "Next token" if handle.task == "causal-lm" else "Prediction")
        st.caption(f"Explained: {safe_text(exp.target_description)}. Method: {views.method_words(exp)}.")
        if facts := methods.describe(exp.method, exp.settings):
            st.caption(safe_text(facts) + ".")
    with right:
        if exp.not_meaningful:  # the method's own verdict (its note is beside the prediction): nothing to draw
            st.warning(f"No map drawn: {views.method_words(exp)} is not meaningful on this text (see the note on "
                       "the left); choose another method.")
            return
        layer_view(request, specials)
        trust_line(name, allow_pickle, exp, text)

    note = figures.matrix_note(exp)
    st.subheader("Final relevance row" if note else "Final matrix")
    st.checkbox("Hide special tokens (matrix and heads)", key="hide_special")
    stem = views.download_stem(exp, exp.text)
    if note:
        st.info(note)
        st.plotly_chart(figures.score_bar(exp), key="matrix")
        st.download_button("Relevance row (PNG)", lambda: figures.figure_png(figures.score_bar(fetch())),
                           f"{stem}_relevance.png", "image/png", key="text_matrix_png", on_click="ignore")
    elif exp.matrix is not None:
        st.plotly_chart(figures.matrix_heatmap(exp, specials=specials), key="matrix")
        st.download_button("Matrix (PNG)",
                           lambda: figures.figure_png(figures.matrix_heatmap(fetch(), specials=specials)),
                           f"{stem}_matrix.png", "image/png", key="text_matrix_png", on_click="ignore")
    else:
        st.info("No full matrix: this page computes only the explained row, shown above "
                "(`python -m rollout_core text --full-matrix` computes the whole matrix). "
                + safe_text(methods.describe(exp.method, exp.settings)) + ".")


show(core.run(f"running {name} and computing {method.method}", fetch) if handle is not None else None)
sync_url()
