"""Views shared by the pages: prediction, downloads (the layer slider's views are in layer_explorer.py)."""
from __future__ import annotations

import re
from typing import Any, Callable

import pandas as pd
import streamlit as st

from app_pages._lib.safe import safe_text
from rollout_core import figures


def prediction(exp: Any, title: str = "Prediction") -> None:
    """Top labels with probabilities, or a note for backbones / encoders without a classifier."""
    if not exp.prediction:
        st.info("Backbone: no classifier. The map explains the pooled representation "
                f"({safe_text(exp.target_description)}).")
        return
    top = exp.prediction[0]
    st.metric(title, safe_text(top.label), f"{top.probability:.1%}", delta_color="off")  # labels can come from a URL
    frame = pd.DataFrame({"label": [p.label for p in exp.prediction],
                          "probability": [p.probability for p in exp.prediction]})
    st.dataframe(frame, hide_index=True, width="stretch",
                 column_config={"probability": st.column_config.ProgressColumn(format="%.3f", min_value=0.0,
                                                                               max_value=1.0)})


def layer_index(layer: int) -> int:
    """The figures' layer index (0 = the first rolled-out layer) of the slider's 1-based `layer`."""
    return layer - 1


def download_stem(exp: Any, source: str) -> str:
    """A file name stem naming the method, model and input, e.g. `rollout_default-text_the-food-was`."""
    words = re.findall(r"[a-z0-9]+", source.lower())[:3] or ["input"]
    parts = (exp.method, exp.model_name.rsplit("/", 1)[-1], "-".join(words))
    return "_".join(re.sub(r"[^A-Za-z0-9.-]+", "-", part).strip("-") for part in parts)


def downloads(exp: Any, charts: dict[str, Callable[[], Any]], key: str, stem: str) -> None:
    """CSV and JSON of the scores; PNG of each figure (rendered only when clicked), files named `{stem}...`.

    The chart makers run when a button is clicked, outside the script run: they must not read session state,
    so the caller binds the layer and settings on screen into them (and draws this where those change)."""
    cols = st.columns(2 + len(charts))
    cols[0].download_button("Scores (CSV)", lambda: figures.scores_csv(exp), f"{stem}.csv", "text/csv",
                            key=f"{key}_csv")
    cols[1].download_button("Explanation (JSON)", lambda: figures.scores_json(exp), f"{stem}.json",
                            "application/json", key=f"{key}_json")
    for col, (name, make) in zip(cols[2:], charts.items()):
        col.download_button(f"{name} (PNG)", lambda make=make: figures.figure_png(make()),
                            f"{stem}_{name.lower().replace(' ', '-')}.png", "image/png", key=f"{key}_{name}_png")
