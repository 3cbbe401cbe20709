"""Views shared by the pages: prediction, downloads (the layer slider's views are in layer_explorer.py)."""
from __future__ import annotations

import re
from typing import Any, Callable

import pandas as pd
import streamlit as st

from app_pages._lib.safe import safe_text
from rollout_core import figures, methods


def prediction(exp: Any, title: str = "Prediction") -> None:
    """Top labels with probabilities (or a note for backbones / encoders without a classifier), then the
    explanation's warnings (text the model cannot read, an uncertain prediction, a cut text)."""
    for note in getattr(exp, "warnings", ()):
        st.warning(safe_text(note))
    if not exp.prediction:
        st.info("Backbone: no classifier. The map explains the pooled representation "
                f"({safe_text(exp.target_description)}).")
        return
    top = exp.prediction[0]
    if top.similarity is not None:
        _zero_shot(exp, title)
        return
    # the probability as the metric's delta, without the arrow of a change; labels can come from a URL
    st.metric(title, safe_text(top.label), f"{top.probability:.1%}", delta_color="off", delta_arrow="off")
    frame = pd.DataFrame({"label": [p.label for p in exp.prediction],
                          "probability": [p.probability for p in exp.prediction]})
    st.dataframe(frame, hide_index=True, width="stretch",
                 column_config={"probability": st.column_config.ProgressColumn(format="%.3f", min_value=0.0,
                                                                               max_value=1.0)})


def _zero_shot(exp: Any, title: str) -> None:
    """Zero-shot labels: the cosine similarity of the text to each label, which is what the encoder says; the
    softmax over the labels given is only their relative standing, not a probability of being right."""
    top = exp.prediction[0]
    st.metric(title, safe_text(top.label), f"cosine {top.similarity:.2f}", delta_color="off", delta_arrow="off",
              help="Zero-shot: the label whose embedding is closest to the text's (cosine similarity, -1 to 1).")
    frame = pd.DataFrame({"label": [p.label for p in exp.prediction],
                          "cosine similarity": [p.similarity for p in exp.prediction],
                          "share among these labels": [p.probability for p in exp.prediction]})
    st.dataframe(frame, hide_index=True, width="stretch", column_config={
        "cosine similarity": st.column_config.NumberColumn(format="%.3f"),
        "share among these labels": st.column_config.NumberColumn(
            format="%.3f", help="Softmax of the similarities over the labels given: it changes with the labels "
                                "you list, and is not the probability that the label is right.")})


def method_words(exp: Any) -> str:
    """The method by its display name and what it covers: "ALTI rollout, 6 layers", "AttnLRP (...), whole model"."""
    name = safe_text(methods.display_name(exp.method))
    spec = methods.get(exp.method) if exp.method in methods.names() else None
    if spec is not None and not spec.layered:
        return f"{name}, whole model"
    return f"{name}, {exp.num_layers} layer{'s' if exp.num_layers != 1 else ''}"


def layer_index(layer: int) -> int:
    """The figures' layer index (0 = the first rolled-out layer) of the slider's 1-based `layer`."""
    return layer - 1


def download_stem(exp: Any, source: str) -> str:
    """A file name stem naming the method, model and input, e.g. `rollout_default-text_the-food-was`."""
    words = re.findall(r"[a-z0-9]+", source.lower())[:3] or ["input"]
    parts = (exp.method, exp.model_name.rsplit("/", 1)[-1], "-".join(words))
    return "_".join(re.sub(r"[^A-Za-z0-9.-]+", "-", part).strip("-") for part in parts)


_FIGURE_FORMATS = (("PNG", figures.figure_png, "image/png"), ("SVG", figures.figure_svg, "image/svg+xml"),
                   ("PDF", figures.figure_pdf, "application/pdf"))


def downloads(fetch: Callable[[], Any], kind: str, charts: dict[str, Callable[[Any], Any]], key: str, stem: str,
              view: dict[str, Any] | None = None) -> None:
    """CSV and JSON of the scores; the standalone HTML page of the view on screen (`view`: its layer,
    raw_attention and display options, as `Explanation.to_html` takes them) and, for `kind` "text", its highlight
    as SVG; PNG, SVG and PDF of each figure (`charts`: name -> figure of an explanation). Everything is rendered
    only when clicked; files are named `{stem}...`.

    The makers hold `fetch`, the cached call that gave the explanation, not the explanation: Streamlit keeps a
    closed tab's makers for minutes (server.disconnectedSessionTTL), and an explanation the result cache has
    dropped must not stay alive through them. They run when a button is clicked, outside the script run: they
    must not read session state, so the caller binds the layer and settings on screen into them (and draws this
    where those change)."""
    view = view or {}
    cols = st.columns(2 + len(charts))
    cols[0].download_button("Scores (CSV)", lambda: figures.scores_csv(fetch()), f"{stem}.csv", "text/csv",
                            key=f"{key}_csv", on_click="ignore")
    cols[0].download_button("Explanation (JSON)", lambda: figures.scores_json(fetch()), f"{stem}.json",
                            "application/json", key=f"{key}_json", on_click="ignore")
    cols[1].download_button("View (HTML)", lambda: fetch().to_html(**view).encode("utf-8"), f"{stem}.html",
                            "text/html", key=f"{key}_html", help="One file with the layer slider; opens offline",
                            on_click="ignore")
    if kind == "text":
        highlight = {k: view[k] for k in ("layer", "raw_attention") if k in view}
        cols[1].download_button("Highlight (SVG)", lambda: figures.token_highlight_svg(fetch(), **highlight),
                                f"{stem}_highlight.svg", "image/svg+xml", key=f"{key}_highlight_svg", on_click="ignore")
    for col, (name, make) in zip(cols[2:], charts.items()):
        file = f"{stem}_{name.lower().replace(' ', '-')}"
        for fmt, render, mime in _FIGURE_FORMATS:
            col.download_button(f"{name} ({fmt})", lambda make=make, render=render: render(make(fetch())),
                                f"{file}.{fmt.lower()}", mime, key=f"{key}_{name}_{fmt.lower()}", on_click="ignore")
