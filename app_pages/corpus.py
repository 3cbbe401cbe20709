"""Corpus page: per-class deciding words over many texts, their examples, and the evidence hit rate."""
from __future__ import annotations

from pathlib import Path

import pandas as pd
import plotly.express as px
import streamlit as st

from app_pages._lib import core
from rollout_core.corpus.aggregate import class_tokens, examples_for
from rollout_core.corpus.engine import explain_rows, read_results
from rollout_core.corpus.views import evidence_hit_rate, row_highlight_html
from rollout_core.data.sentiment import generate
from rollout_core.errors import RolloutError

MAX_ROWS = 2000

st.title("Corpus")
source = st.radio("Source", ["Generated sentences", "Uploaded CSV", "Result folder"], horizontal=True)
results, evidence = None, {}
try:
    if source == "Result folder":
        folder = st.text_input("Result folder (from `rollout corpus run --out ...`)")
        if folder:
            results = read_results(Path(folder))
    else:
        n = st.number_input("Rows", 10, MAX_ROWS, 100, step=10)
        if source == "Generated sentences":
            examples = generate(int(n), seed=0)
            corpus = pd.DataFrame({"id": [str(i) for i in range(len(examples))],
                                   "text": [e.text for e in examples], "label": [e.label for e in examples]})
            evidence = {str(i): e.evidence for i, e in enumerate(examples)}
        else:
            upload = st.file_uploader("CSV with a `text` column (optional `label`)", type="csv")
            corpus = None
            if upload is not None:
                frame = pd.read_csv(upload).head(int(n))
                if "text" not in frame.columns:
                    raise RolloutError("the CSV has no `text` column")
                corpus = pd.DataFrame({"id": [str(i) for i in range(len(frame))], "text": frame["text"].astype(str),
                                       "label": frame["label"].astype(str) if "label" in frame else None})
        if corpus is not None and st.button("Explain", type="primary"):
            with st.spinner(f"explaining {len(corpus)} texts"):
                st.session_state["corpus_results"] = explain_rows(
                    core.load("default-text"), corpus, "rollout", 16).to_pandas()
                st.session_state["corpus_evidence"] = evidence
        results = st.session_state.get("corpus_results")
        evidence = st.session_state.get("corpus_evidence", {})
except (RolloutError, ValueError) as err:
    st.error(str(err))

if results is not None and len(results):
    if results["label"].notna().all():
        results = results.assign(correct=results["label"] == results["prediction"])
        keep = st.radio("Rows", ["all", "correct", "incorrect"], horizontal=True)
        if keep != "all":
            results = results[results["correct"] == (keep == "correct")]
    classes = sorted(results["prediction"].dropna().unique())
    label = st.selectbox("Predicted class", classes)
    table = class_tokens(results[results["prediction"] == label], min_count=2)
    top = table.head(20)
    st.plotly_chart(px.bar(top, x="word", y="mean_share", hover_data=["count", "top1_share"],
                           title=f"Deciding words for {label}"))
    st.download_button("Download CSV", class_tokens(results).to_csv(index=False), "corpus_words.csv", "text/csv")
    if evidence:
        rate = evidence_hit_rate(results, evidence)
        st.metric("Top word inside the evidence", f"{rate:.0%}")
    if len(top):
        word = st.selectbox("Word", list(top["word"]))
        for _, row in examples_for(results, word, label).head(10).iterrows():
            st.markdown(row_highlight_html(row, marker=word), unsafe_allow_html=True)
