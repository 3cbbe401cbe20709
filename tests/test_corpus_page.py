"""The Corpus page as a user meets it (AppTest): it opens on the model's measured default method, keeps words seen
once (a minimum the user sets, with a note), says why a selection is empty, and keeps its settings in the URL."""
from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
import streamlit as st
from streamlit.testing.v1 import AppTest

from rollout_core import methods
from rollout_core.corpus.aggregate import class_tokens, examples_for
from rollout_core.corpus.engine import read_results, run_corpus
from rollout_core.data.sentiment import generate
from rollout_core.models import measured, registry

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def folder(tiny_handle, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A result folder of 12 generated sentences explained by the tiny BERT, under ROLLOUT_CORPUS_DIR."""
    rows = generate(12, seed=3)
    corpus = pd.DataFrame({"id": [f"r{i}" for i in range(12)], "text": [r.text for r in rows],
                           "label": [r.label for r in rows]})
    run_corpus(tiny_handle("bert"), corpus, tmp_path / "run-1", batch_size=6, progress=lambda done, total: None)
    monkeypatch.setenv("ROLLOUT_CORPUS_DIR", str(tmp_path))
    st.cache_resource.clear()
    return tmp_path / "run-1"


def _page(**query: str) -> AppTest:
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=120)
    for key, value in query.items():
        at.query_params[key] = value
    return at.switch_page("app_pages/corpus.py").run()


def _clean(at: AppTest) -> None:
    assert not at.exception, [str(e.value) for e in at.exception]
    assert not at.error, [str(e.value) for e in at.error]


def test_opens_on_the_measured_default_method() -> None:
    if not registry.is_available(registry.lookup("default-text")):
        pytest.skip(f"default-text is not built: {registry.SETUP_HINT}")
    st.cache_resource.clear()
    at = _page(model="default-text")
    _clean(at)
    default = measured.default_method("default-text", methods.names())
    assert at.selectbox(key="corpus_method").value == default != "rollout"


def test_words_seen_once_are_kept_and_the_settings_live_in_the_url(folder: Path) -> None:
    at = _page(source="Result folder")
    _clean(at)
    results = read_results(folder)
    label = at.selectbox(key="class").value
    chart = at.get("plotly_chart")[0]
    assert "seen at least once" in chart.proto.spec
    once = class_tokens(results[results["prediction"] == label])
    assert (once["count"] == 1).any()  # on 12 rows many words appear once: they are in the table, not dropped
    # only words that lead some row are offered, and each lists its rows
    offered = at.selectbox(key="word").options
    assert offered and all(len(examples_for(results, w, label)) for w in offered)
    at.number_input(key="min_count").set_value(1000).run()
    _clean(at)
    assert any("lower the minimum" in str(i.value) for i in at.info) and not at.get("plotly_chart")
    at.radio(key="filter").set_value("incorrect").run()
    _clean(at)
    assert {k: at.query_params[k] for k in ("source", "min_count", "filter")} == {
        "source": "Result folder", "min_count": "1000", "filter": "incorrect"}
    again = _page(**{k: at.query_params[k] for k in at.query_params})  # the shared link restores the view
    _clean(again)
    assert again.number_input(key="min_count").value == 1000 and again.radio(key="filter").value == "incorrect"
