"""The Corpus page's comparison of two finished runs (`rollout_core.corpus.compare_runs`): pick two result folders,
see the tables and plots, open a row in the Compare page with both sides set, download the report."""
from __future__ import annotations

from pathlib import Path
from urllib.parse import urlencode

import pandas as pd
import streamlit as st

from app_pages._lib import core
from app_pages._lib.inputs import TEXT_PARAM, upload_store
from app_pages._lib.safe import safe_text
from app_pages._lib.state import MAX_URL_TEXT, param
from app_pages._lib.visitor import visitor
from rollout_core.corpus.compare_report import patch_map, report_html, side_row
from rollout_core.corpus.compare_rows import GROUPINGS, KINDS
from rollout_core.corpus.compare_runs import compare_runs
from rollout_core.corpus.comparison import CorpusComparison
from rollout_core.corpus.stored_runs import open_run
from rollout_core.corpus.views import result_folders, row_highlight_html
from rollout_core.figures import corpus_compare as figures
from rollout_core.paths import corpus_dir
from rollout_core.serving import budget

HEAVY_ROWS = 20_000
"""Comparisons of more rows take one of the server's heavy slots."""
MOVED_COLUMNS = ["unit", "count", "mean_a", "mean_b", "diff", "low", "high"]


def _signature(folder: Path) -> tuple:
    """What the cached comparison depends on: the folder's files, their sizes and times."""
    return tuple(sorted((p.name, p.stat().st_size, p.stat().st_mtime_ns) for p in folder.iterdir() if p.is_file()))


def _compare(a: Path, b: Path, by: str) -> tuple[tuple, CorpusComparison]:
    """The cache key and the comparison of runs `a` and `b` (computed once per process while the folders stay)."""
    rows = open_run(a, "run A").rows
    key = ("corpus-compare", str(a), _signature(a), str(b), _signature(b), by)
    seconds = budget.HEAVY_SECONDS if rows > HEAVY_ROWS else 0.0
    return key, core.cached(key, lambda: compare_runs(a, b, by=by), seconds)


def compare_link(result: CorpusComparison, row: pd.Series) -> str | None:
    """The Compare page's address with both sides set for `row` (text runs with a manifest), else None."""
    manifests = [result.manifest_a, result.manifest_b]
    if row.get("kind") != "text" or not all(manifests):
        return None
    (model_a, method_a), (model_b, method_b) = ((m.get("model"), m.get("method")) for m in manifests)
    params = {"modality": "text", "model": model_a, "method": method_a}
    if model_a == model_b:
        params.update(mode="methods", b_method=method_b)
    else:
        params.update(mode="models", model_b=model_b)
    text = str(row["text"])
    if len(text) > MAX_URL_TEXT:
        params[TEXT_PARAM] = upload_store().put_text(text, visitor())
    else:
        params["text"] = text
    return "compare?" + urlencode(params)


def show() -> None:
    """The comparison view (the Corpus page calls this when "Compare two runs" is picked)."""
    root = corpus_dir()
    folders = result_folders(root)
    if len(folders) < 2:
        st.info(safe_text(f"Comparing needs two result folders under {root}; found {len(folders)}. Write runs there "
                          "with `python -m rollout_core corpus --data FILE --out DIR` (two models or two methods "
                          "over the same data)."))
        return
    by_name = {p.name: p for p in folders}
    names = tuple(by_name)
    param("run_a", names[0], names)  # in the link: a folder's name, only ever one of those listed
    param("run_b", names[1], names)
    param("by", "prediction_a", tuple(GROUPINGS))
    left, right, by_col = st.columns([2, 2, 1])
    a = by_name[left.selectbox("Run A", names, key="run_a")]
    b = by_name[right.selectbox("Run B", names, key="run_b")]
    by = by_col.selectbox("Classes by", list(GROUPINGS), format_func=GROUPINGS.__getitem__, key="by")
    if a == b:
        st.info("Pick two different runs.")
        return
    compared = None
    with core.guarded("comparing the two runs"):
        with st.spinner("Comparing the runs…"):
            compared = _compare(a, b, by)
    if compared is not None:
        _draw(*compared)


def _method_note(result: CorpusComparison) -> str | None:
    """What "Open in Compare" cannot set: B's method, when the runs differ in both model and method."""
    if not (result.manifest_a and result.manifest_b):
        return None
    (model_a, method_a), (model_b, method_b) = ((m.get("model"), m.get("method"))
                                                for m in (result.manifest_a, result.manifest_b))
    if model_a == model_b or method_a == method_b:
        return None
    return (f"The runs differ in model and method: \"Open in Compare\" shows both models with A's method "
            f"({method_a}), as the Compare page compares two models under one method; B's run used {method_b}.")


def _draw(key: tuple, result: CorpusComparison) -> None:
    st.markdown(f"**A**: {safe_text(result.describe_a)} · **B**: {safe_text(result.describe_b)}")
    note = _method_note(result)
    if note is not None:
        st.caption(safe_text(note))
    st.markdown(f"**{safe_text(result.summary_line())}**")
    html = core.cached((*key, "report"), lambda: report_html(result))
    st.download_button("Download the report (HTML, works offline)", html, "corpus_compare.html", "text/html",
                       on_click="ignore")
    st.subheader("Per class")
    st.caption(safe_text(f"Rows are grouped by {GROUPINGS[result.by]}."))
    st.dataframe(result.classes, hide_index=True)
    st.plotly_chart(figures.spearman_histogram(result.examples["spearman"].to_numpy()))
    unit = "patches" if result.kind == "image" else "words"
    st.subheader(f"The {unit} whose mean share moved most")
    if result.moved.empty:
        st.info(f"No {unit[:-1]} is seen often enough in any class to be ranked.")
    else:
        classes = sorted(result.moved["class"].unique())
        param("class", classes[0], tuple(classes))
        cls = st.selectbox("Class", classes, format_func=safe_text, key="class")
        moved = result.moved[result.moved["class"] == cls]
        st.plotly_chart(figures.moved_units_figure(moved, cls))
        st.dataframe(moved[MOVED_COLUMNS], hide_index=True)
        lists = result.top_lists[(result.top_lists["class"] == cls) & (result.top_lists["change"] != "stayed")]
        st.caption(f"Entered or left the class's top {result.settings['top']} by mean share:")
        st.dataframe(lists[["unit", "change", "rank_a", "rank_b", "mean_a", "mean_b"]], hide_index=True)
        if cls in result.maps:
            st.plotly_chart(figures.difference_map_figure(result.maps[cls], cls))
    for kind, title in KINDS.items():
        st.subheader(f"Rows where {title}")
        frame = result.disagreements.get(kind, pd.DataFrame())
        if frame.empty:
            st.caption("None.")
        for _, row in frame.iterrows():
            _example(result, row)


def _example(result: CorpusComparison, row: pd.Series) -> None:
    st.markdown(safe_text(f"{row['id']}: A {row['prediction_a']} ({row['probability_a']:.1%}), B "
                          f"{row['prediction_b']} ({row['probability_b']:.1%}), Spearman {row['spearman']:.3f}"))
    if row["kind"] == "image":
        st.plotly_chart(figures.patch_pair_figure(patch_map(row["words_a"], row["scores_a"]),
                                                  patch_map(row["words_b"], row["scores_b"]), str(row["id"])))
    else:
        for col, side in zip(st.columns(2), "ab"):
            col.markdown(row_highlight_html(side_row(row, side)), unsafe_allow_html=True)
    link = compare_link(result, row)
    if link is not None:
        st.link_button("Open in Compare", link)
