"""Reference for bench_slider.py: the text page's layer view as it was drawn before commit af418c6.

A st.slider inside a fragment: every move is a round trip to the server, which redraws the highlight, the
summary and the bar chart of that layer (explanation cached, as on the page). Same core figures, same scale.
"""
from __future__ import annotations

import streamlit as st

from rollout_core import explain, figures
from rollout_core.figures.layer_views import scale_tops
from rollout_core.models.loading import load_model
from rollout_core.summary import summarize

TEXT = "The food was cold and the waiter was rude."
LABEL = "Layer (cumulative rollout up to this layer)"


@st.cache_resource
def explanation(text: str):
    return explain.explain_text(load_model("default-text"), text, method="rollout")  # LABEL is rollout's


exp = explanation(TEXT)
top = scale_tops(exp)[False]


@st.fragment
def layer_view() -> None:
    layer = st.slider(LABEL, 1, exp.num_layers, exp.num_layers, key="layer")
    st.html(figures.token_highlight_html(exp, layer=layer - 1, zmax=top, marker=f"layer-{layer}-cum"))
    st.markdown(summarize(exp, layer=layer - 1))
    st.plotly_chart(figures.score_bar(exp, layer=layer - 1, zmax=top), key="bars")


layer_view()
