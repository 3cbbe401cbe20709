"""Text page: explain one sentence with the chosen model and method."""
from __future__ import annotations

import streamlit as st

from app_pages._lib import core, draw, views
from app_pages._lib.sidebar import method_settings, model_picker
from app_pages._lib.state import param, sync_url
from rollout_core.data.sentiment import EXAMPLE_SENTENCES

st.title("Text")

with st.sidebar:
    st.header("Model")
    name, allow_pickle = model_picker("text")
    st.header("Method")
    method = method_settings()

param("text", EXAMPLE_SENTENCES[0])


def _use_example() -> None:
    st.session_state["text"] = st.session_state["example"]


st.selectbox("Example sentences", EXAMPLE_SENTENCES, key="example", index=None, placeholder="Pick an example…",
             on_change=_use_example)
text = st.text_area("Text to explain", key="text", height=90, max_chars=200_000)

handle = core.run(f"loading {name or 'the model'}", core.load, name, allow_pickle)
labels: tuple[str, ...] | None = None
if handle is not None and handle.task == "sentence-encoder":
    param("labels", "positive, negative")
    raw_labels = st.text_input("Zero-shot labels (comma separated)", key="labels",
                               help="The prediction is the label whose embedding is most similar to the text's.")
    labels = tuple(label.strip() for label in raw_labels.split(",") if label.strip()) or None

exp = None
if handle is not None:
    exp = core.run(f"running {name} and computing {method.method}", core.explain_text, name, allow_pickle, text,
                   method, labels)



@st.fragment
def layer_view(exp: object, keep: list[int]) -> None:
    """Everything that follows the layer slider; a slider move reruns only this part."""
    layer, raw = views.layer_choice(exp.num_layers)
    row = views.layer_row(exp, layer, raw)
    scores = exp.display_scores(row)
    tokens = exp.display_tokens()
    zmax = views.shared_zmax(exp, raw=raw)
    what = f"layer {layer} attention" if raw else f"rollout up to layer {layer}"
    st.html(draw.token_html(tokens, scores, zmax, marker=f"layer-{layer}-{'raw' if raw else 'cum'}"))
    st.plotly_chart(draw.bars(tokens, scores, zmax, f"Share of each token: {what}"), key="bars")
    st.subheader(f"Heads of layer {layer}")
    if exp.head_attention is not None:
        labels_shown = [exp.tokens[i] for i in keep]
        heads = exp.head_attention[layer - 1][:, keep][:, :, keep]
        st.plotly_chart(draw.head_grid(heads, labels_shown, layer), key="heads")
        head = st.pills("Enlarge a head", list(range(heads.shape[0])), key="head", format_func=lambda h: f"head {h}")
        if head is not None:
            st.plotly_chart(draw.heatmap(heads[head], labels_shown, f"Layer {layer}, head {head}"), key="head_big")
    else:
        st.caption("Per-head attention was not kept for this explanation.")
    sync_url()


if exp is not None:
    if exp.truncation:
        cut = exp.truncation
        st.warning(f"The text is longer than the model's limit: only the first {cut['kept_chars']:,} of "
                   f"{cut['total_chars']:,} characters ({cut['kept_tokens']} tokens) were explained. "
                   f"The explained text ends with: “…{exp.text[-40:]}”")
    param("hide_special", True)
    hide = st.session_state["hide_special"]
    keep = exp.display_positions().tolist() if hide else list(range(len(exp.tokens)))
    left, right = st.columns([1, 2])
    with left:
        views.prediction(exp, "Next token" if handle.task == "causal-lm" else "Prediction")
        st.caption(f"Explained: {exp.target_description}. Method: {exp.method}, {exp.num_layers} layers.")
        views.summary(exp)
    with right:
        layer_view(exp, keep)

    st.subheader("Final matrix")
    st.checkbox("Hide special tokens (matrix and heads)", key="hide_special")
    matrix_fig = None
    if exp.matrix is not None:
        matrix_fig = draw.heatmap(exp.matrix[keep][:, keep], [exp.tokens[i] for i in keep],
                                  f"{exp.method}: R[i, j] = share of input j in output i")
        st.plotly_chart(matrix_fig, key="matrix")
    else:
        st.info("No full matrix for this method and input (too costly); the explained row is shown above.")

    st.subheader("Downloads")
    final = exp.display_scores()
    figures = {"Bar chart": lambda: draw.bars(exp.display_tokens(), final, float(final.max()), "Final scores")}
    if matrix_fig is not None:
        figures["Matrix"] = lambda: matrix_fig
    views.downloads(exp, figures, key="text")

sync_url()
