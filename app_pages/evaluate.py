"""Evaluate page: how faithful each method's map is (perturbation curves, ground truth, agreement)."""
from __future__ import annotations

import plotly.express as px
import streamlit as st

from app_pages._lib import core
from app_pages._lib.safe import safe_text
from app_pages._lib.sidebar import model_and_method
from app_pages._lib.state import param, sync_url
from rollout_core.data.example_images import example_images
from rollout_core.data.sentiment import EXAMPLE_SENTENCES
from rollout_core.faithfulness.evaluate import BETTER, METHODS, REFERENCES

st.title("Evaluate")
st.markdown("Remove the most (or least) relevant tokens/patches first and watch the predicted class: a faithful "
            "map makes the probability fall fast on deletion and rise fast on insertion. The **random** row is "
            "chance. Arrows say which direction is better.")

param("modality", "text", ("text", "image"))
modality = st.radio("Input", ["text", "image"], key="modality", horizontal=True, format_func=str.capitalize)
name, allow_pickle, method, _ = model_and_method(modality, method_header="Method options")

choices = (*METHODS, *REFERENCES)
methods = tuple(st.multiselect("Methods", choices, default=["rollout", "attention", "gradient"], key="methods"))
one, many = st.tabs(["One input", "Generated data set (with ground truth)"])


def _table(table):  # noqa: ANN001, ANN202 - a DataFrame
    arrows = {m: f"{m} {'↑' if BETTER[m] == 'higher' else '↓'}" for m in BETTER}
    st.dataframe(table.rename(columns=arrows), width="stretch")


with one:
    if modality == "text":
        param("text", EXAMPLE_SENTENCES[0])
        source = st.text_area("Text", key="text", height=80)
    else:
        examples = core.run("listing the bundled examples", example_images) or {}
        names = list(examples)
        param("example", "shapes-triangle" if "shapes-triangle" in names else names[0], tuple(names))
        source = examples[st.selectbox("Bundled example", names, key="example")].read_bytes() if names else None
    if st.button("Evaluate this input", type="primary", disabled=not methods) and source is not None:
        st.session_state["evaluate_one"] = True
    if st.session_state.get("evaluate_one") and source is not None and methods:
        result = core.run(f"perturbing the input for {len(methods)} methods", core.evaluate_input, name,
                          allow_pickle, source, methods, method)
        if result is not None:
            st.metric("Predicted (target of every curve)", safe_text(result.predicted), f"{result.probability:.1%}",
                      delta_color="off")
            _table(result.table)
            fig = px.line(result.curves, x="fraction", y="value", color="method", facet_col="curve", markers=True)
            fig.update_layout(height=360, margin=dict(l=40, r=10, t=40, b=40))
            st.plotly_chart(fig, key="curves")

with many:
    param("limit", 10, low=2, high=100)
    limit = st.slider("Examples", 2, 100, key="limit")
    if st.button(f"Evaluate {limit} generated {modality} examples", disabled=not methods):
        bar = st.progress(0.0, "starting")
        result = core.run(f"evaluating {limit} examples", core.evaluate_dataset, name, allow_pickle, modality,
                          methods, limit, method, lambda done, total: bar.progress(done / total, f"{done}/{total}"))
        if result is not None:
            st.metric("Model accuracy on these examples", f"{result.accuracy:.1%}")
            _table(result.summary)

sync_url()
