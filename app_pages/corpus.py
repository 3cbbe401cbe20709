"""Corpus page: per-class deciding words over many texts, their examples, and the evidence hit rate."""
from __future__ import annotations

import time
import uuid
from typing import Any

import pandas as pd
import streamlit as st

from app_pages._lib import core, corpus_compare
from app_pages._lib.safe import safe_text
from app_pages._lib.sidebar import loaded, model_picker
from app_pages._lib.state import param, sync_url
from rollout_core import methods
from rollout_core.corpus import cells as corpus_cells
from rollout_core.corpus.aggregate import class_tokens, examples_for
from rollout_core.corpus.engine import explain_in_batches, read_results
from rollout_core.corpus.views import evidence_hit_rate, result_folders, row_highlight_html, word_share_figure
from rollout_core.data.sentiment import generate
from rollout_core.errors import RolloutError
from rollout_core.models import measured
from rollout_core.paths import corpus_dir
from rollout_core.serving import budget

MAX_ROWS = 2000
COMPARE = "Compare two runs"
BATCH = 16


def _generated(n: int) -> tuple[pd.DataFrame, dict]:
    examples = generate(n, seed=0)
    frame = pd.DataFrame({"id": [str(i) for i in range(len(examples))],
                          "text": [e.text for e in examples], "label": [e.label for e in examples]})
    return frame, {str(i): e.evidence for i, e in enumerate(examples)}


def _uploaded(n: int) -> pd.DataFrame | None:
    upload = st.file_uploader("CSV with a `text` column (optional `label`)", type="csv")
    if upload is None:
        return None
    try:  # every cell read as text; an empty one is missing (skipped when explained, as by the corpus command)
        frame = pd.read_csv(upload, nrows=n, dtype=str, keep_default_na=False, na_values=[""])
    except (ValueError, UnicodeDecodeError) as err:
        raise RolloutError(f"cannot read the CSV: {err}") from err
    if "text" not in frame.columns:
        raise RolloutError("the CSV has no `text` column")
    return pd.DataFrame({"id": [str(i) for i in range(len(frame))], "text": frame["text"],
                         "label": frame["label"] if "label" in frame else None})


def _estimate(handle: Any, corpus: pd.DataFrame, method: str) -> tuple[list, float]:
    """The budget's batches of the rows that can be explained and their summed estimate (the methods' own cost,
    batched as the engine batches them)."""
    rows = corpus_cells.usable(corpus).rows
    batches = budget.corpus_batches(handle, list(rows["text"]), method, BATCH) if len(rows) else []
    return batches, sum(budget.estimate_seconds(method, w) for w in batches)


def _explain_with_progress(model_name: str, allow_pickle: bool, corpus: pd.DataFrame, method: str) -> pd.DataFrame:
    """The rows of `corpus` that can be explained, explained within the compute budget (refused over the limit
    with a cheaper choice; a heavy run takes a heavy slot, one per visitor, and has a Stop); the skipped and cut
    rows named in session notes."""
    cells = corpus_cells.usable(corpus)
    st.session_state["corpus_notes"] = corpus_cells.describe(cells)
    if cells.rows.empty:
        raise RolloutError("no row has text to explain: " + "; ".join(st.session_state["corpus_notes"]))
    corpus = cells.rows
    model = core.load(model_name, allow_pickle)
    try:
        seconds = budget.check_batches(method, budget.corpus_batches(model, list(corpus["text"]), method, BATCH),
                                       choices=budget.choices(model))
    except budget.BudgetError as err:
        err.method_key = "corpus_method"  # the refusal's cheaper method, offered as a button (core.guarded)
        raise
    if seconds < budget.HEAVY_SECONDS:
        return _run(model, corpus, method)
    request = st.session_state["corpus_request"] = uuid.uuid4().hex
    with core.heavy_run(seconds, f"{methods.display_name(method)} on {len(corpus)} rows", request):
        return _run(model, corpus, method)


def _run(model: Any, corpus: pd.DataFrame, method: str) -> pd.DataFrame:
    bar, start, done = st.progress(0.0, text="starting"), time.monotonic(), 0

    def advance(rows: int) -> None:
        nonlocal done
        done += rows
        rate = done / max(time.monotonic() - start, 1e-9)
        bar.progress(done / len(corpus), text=f"{done}/{len(corpus)} texts · {rate:.1f}/s · "
                                              f"{(len(corpus) - done) / rate:.0f} s left")

    table = explain_in_batches(model, corpus, method, BATCH, progress=advance)
    bar.empty()
    return table.to_pandas()


st.title("Corpus")
st.caption("Which words does the model lean on across many texts, per predicted class? Large data sets: "
           "`python -m rollout_core corpus --data FILE --out DIR` (resumable, local or Ray), then open the folder "
           "here.")
SOURCES = ("Generated sentences", "Uploaded CSV", "Result folder", COMPARE)
FILTERS = ("all", "correct", "incorrect")
with st.sidebar:
    model_name, allow_pickle = model_picker("text")
    handle = loaded(model_name, allow_pickle)
    offered = [s.name for s in methods.runnable(handle)] if handle is not None else list(methods.names())
    default = measured.default_method(model_name, methods.names())  # the model's measured best, as on the other pages
    param("corpus_method", default if default in offered else offered[0], tuple(offered))
    if st.session_state["corpus_method"] not in offered:  # another model, which cannot run the method chosen
        st.session_state["corpus_method"] = default if default in offered else offered[0]
    method = st.selectbox("Method", offered, format_func=methods.display_name, key="corpus_method")
param("source", SOURCES[0], SOURCES)
source = st.radio("Source", SOURCES, horizontal=True, key="source")
if source == COMPARE:
    corpus_compare.show()
    sync_url()
    st.stop()
results, evidence = None, {}
with core.guarded("reading the corpus"):
    if source == "Result folder":
        root = corpus_dir()
        folders = result_folders(root)
        if not folders:
            st.info(safe_text(f"No result folders under {root} yet (set ROLLOUT_CORPUS_DIR to look elsewhere)."))
        else:
            folder = st.selectbox("Result folder", folders, format_func=lambda p: p.name)
            results = read_results(folder)
    else:
        param("rows", 100, low=10, high=MAX_ROWS)
        n = int(st.number_input("Rows", 10, MAX_ROWS, step=10, key="rows"))
        corpus = None
        if source == "Generated sentences":
            corpus, evidence = _generated(n)
        else:
            corpus = _uploaded(n)
        if core.stopped(st.session_state.get("corpus_request", "")):  # its Stop was clicked: this is the rerun
            st.info("Stopped: the corpus run was stopped and nothing of it was kept. Explain fewer rows, or choose "
                    "a cheaper method, for a shorter run.")
            st.session_state.pop("corpus_request")
        if corpus is not None and handle is not None:
            batches, seconds = _estimate(handle, corpus, method)
            if batches:
                over = seconds > budget.max_seconds()
                st.caption(f"Estimated time with {methods.display_name(method)}: {budget.in_words(seconds)} for "
                           f"{sum(w.batch for w in batches)} rows"
                           + (f", over this server's limit of {budget.in_words(budget.max_seconds())}." if over
                              else "."))
        if corpus is not None and model_name and st.button("Explain", type="primary"):
            st.session_state["corpus_results"] = _explain_with_progress(model_name, allow_pickle, corpus, method)
            st.session_state["corpus_evidence"] = evidence
        results = st.session_state.get("corpus_results")
        evidence = st.session_state.get("corpus_evidence", {})
        for note in st.session_state.get("corpus_notes", []) if results is not None else []:
            st.info(safe_text(note[0].upper() + note[1:] + "."))

if results is not None and len(results):
    if results["label"].notna().all():
        results = results.assign(correct=results["label"] == results["prediction"])
        st.caption(f"Accuracy on these rows: {results['correct'].mean():.0%}")
        param("filter", FILTERS[0], FILTERS)
        keep = st.radio("Rows", FILTERS, horizontal=True, key="filter")
        if keep != "all":
            results = results[results["correct"] == (keep == "correct")]
    classes = sorted(results["prediction"].dropna().unique())
    if not classes:
        st.info(f"No {keep} rows: every row is {'in' if keep == 'correct' else ''}correct.")
        sync_url()
        st.stop()
    if st.session_state.get("class") not in classes:
        st.session_state.pop("class", None)
    param("class", classes[0], tuple(classes))
    label = st.selectbox("Predicted class", classes, format_func=safe_text, key="class")
    param("min_count", 1, low=1, high=1000)
    least = int(st.number_input("Words seen at least this many times", 1, 1000, step=1, key="min_count",
                                help="1 keeps every word: on a few rows most words appear once, and a minimum of "
                                     "2 leaves mostly '.', 'the' and ','. Raise it on large sets to rank only "
                                     "words that recur."))
    table = class_tokens(results[results["prediction"] == label], min_count=least)
    top = table.head(20)
    if top.empty:
        st.info(safe_text(f"No word of the {label} rows is seen {least} times or more: lower the minimum."))
    else:
        st.plotly_chart(word_share_figure(top, label, least))
        if least == 1:
            st.caption("A word seen once ranks by its one share; raise the minimum to rank only recurring words.")
    st.download_button("Download the word table (CSV)", class_tokens(results).to_csv(index=False),
                       "corpus_words.csv", "text/csv", on_click="ignore")
    if evidence:
        rate = evidence_hit_rate(results, evidence)
        st.metric("Rows whose top word is a deciding word (ground truth)", f"{rate:.0%}")
    leading = top[top["top1_share"] > 0]  # words that are the top word of at least one row
    if len(top) and leading.empty:
        st.info("None of these words is the top word of any row (each scores high on average without leading "
                "one), so there are no rows to show by top word.")
    elif len(leading):
        words = list(leading["word"])
        if st.session_state.get("word") not in words:
            st.session_state.pop("word", None)
        param("word", words[0], tuple(words))
        word = st.selectbox("Show the rows where this word is the top word", words, format_func=safe_text,
                            key="word")
        for _, row in examples_for(results, word, label).head(10).iterrows():
            st.markdown(row_highlight_html(row, marker=word), unsafe_allow_html=True)
sync_url()
