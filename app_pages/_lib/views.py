"""Views shared by the text and comparison pages: prediction, layer slider, downloads, summary."""
from __future__ import annotations

import io
from typing import Any, Callable

import numpy as np
import pandas as pd
import streamlit as st

from app_pages._lib.state import param


def prediction(exp: Any, title: str = "Prediction") -> None:
    """Top labels with probabilities, or a note for backbones / encoders without a classifier."""
    if not exp.prediction:
        st.info("Backbone: no classifier. The map explains the pooled representation "
                f"({exp.target_description}).")
        return
    top = exp.prediction[0]
    st.metric(title, top.label, f"{top.probability:.1%}", delta_color="off")
    frame = pd.DataFrame({"label": [p.label for p in exp.prediction],
                          "probability": [p.probability for p in exp.prediction]})
    st.dataframe(frame, hide_index=True, width="stretch",
                 column_config={"probability": st.column_config.ProgressColumn(format="%.3f", min_value=0.0,
                                                                               max_value=1.0)})


def layer_choice(num_layers: int, key: str = "layer") -> tuple[int, bool]:
    """The 1..L layer slider and the raw-attention toggle; returns (layer, raw)."""
    layer = param(key, num_layers)
    if not 1 <= layer <= num_layers:
        st.session_state[key] = layer = num_layers
    if num_layers > 1:
        layer = st.slider("Layer (cumulative rollout up to this layer)", 1, num_layers, key=key)
    else:
        st.caption("One layer rolled out.")
    param(f"{key}_raw", False)
    raw = st.toggle("Show this layer's own attention instead", key=f"{key}_raw")
    return int(layer), bool(raw)


def layer_row(exp: Any, layer: int, raw: bool) -> np.ndarray:
    """The explained row shown at `layer` (1-based): cumulative rollout, or that layer's raw attention."""
    return (exp.layer_attention_scores if raw else exp.layer_scores)[layer - 1]


def shared_zmax(*exps: Any, raw: bool = False) -> float:
    """One colour scale for a view: the largest displayed score over every layer of every explanation
    (of the cumulative rollout, or of the raw layer attention when that is shown), fixed while the slider moves."""
    return max(float(exp.display_scores(row).max(initial=0.0)) for exp in exps
               for row in (exp.layer_attention_scores if raw else exp.layer_scores))


def summary(exp: Any) -> None:
    """The core's plain-language summary under an explanation."""
    from rollout_core.summary import summarize

    st.markdown(summarize(exp))


def downloads(exp: Any, figures: dict[str, Callable[[], Any]], key: str) -> None:
    """CSV and JSON of the scores; PNG of each figure (rendered only when clicked)."""
    shown = set(exp.display_positions().tolist())
    display = dict(zip(exp.display_positions().tolist(), exp.display_scores().tolist()))
    frame = pd.DataFrame({"position": range(len(exp.tokens)), "token": exp.tokens, "special": exp.special,
                          "score": exp.scores, "display_score": [display.get(i, np.nan) for i in range(len(exp.tokens))]})
    frame["shown"] = [i in shown for i in range(len(exp.tokens))]
    cols = st.columns(2 + len(figures))
    cols[0].download_button("Scores (CSV)", frame.to_csv(index=False), "scores.csv", "text/csv", key=f"{key}_csv")
    cols[1].download_button("Explanation (JSON)", exp.to_json(), "explanation.json", "application/json",
                            key=f"{key}_json")
    for col, (name, make) in zip(cols[2:], figures.items()):
        col.download_button(f"{name} (PNG)", lambda make=make: _png(make()), f"{name.lower().replace(' ', '_')}.png",
                            "image/png", key=f"{key}_{name}_png")


def _png(fig: Any) -> bytes:
    buffer = io.BytesIO(fig.to_image(format="png", scale=2))
    return buffer.getvalue()
