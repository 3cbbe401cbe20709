"""Views shared by the text and comparison pages: prediction, layer slider, downloads, summary."""
from __future__ import annotations

from typing import Any, Callable

import pandas as pd
import streamlit as st

from app_pages._lib.state import param
from rollout_core import figures
from rollout_core.summary import summarize


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


def layer_index(layer: int) -> int:
    """The figures' layer index (0 = the first rolled-out layer) of the slider's 1-based `layer`."""
    return layer - 1


def shared_zmax(*exps: Any, raw: bool = False) -> float:
    """One colour scale for a view: the largest shown share over every layer of every explanation
    (of the cumulative rollout, or of the raw layer attention when that is shown), fixed while the slider moves."""
    return max(figures.shared_zmax(exp, layer=k, raw_attention=raw) for exp in exps for k in range(exp.num_layers))


def summary(exp: Any, layer: int | None = None, raw: bool = False) -> None:
    """The core's plain-language summary of the view the slider shows (the final scores without a layer)."""
    st.markdown(summarize(exp, layer=None if layer is None else layer_index(layer), raw_attention=raw))


def downloads(exp: Any, charts: dict[str, Callable[[], Any]], key: str) -> None:
    """CSV and JSON of the scores; PNG of each figure (rendered only when clicked)."""
    cols = st.columns(2 + len(charts))
    cols[0].download_button("Scores (CSV)", lambda: figures.scores_csv(exp), "scores.csv", "text/csv",
                            key=f"{key}_csv")
    cols[1].download_button("Explanation (JSON)", lambda: figures.scores_json(exp), "explanation.json",
                            "application/json", key=f"{key}_json")
    for col, (name, make) in zip(cols[2:], charts.items()):
        col.download_button(f"{name} (PNG)", lambda make=make: figures.figure_png(make()),
                            f"{name.lower().replace(' ', '_')}.png", "image/png", key=f"{key}_{name}_png")
