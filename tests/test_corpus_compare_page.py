"""The Corpus page's "Compare two runs" view through AppTest: tables, plots, the report download, the link that opens
a row in the Compare page with both sides set (followed here), and runs over different data refused."""
from __future__ import annotations

from pathlib import Path
from urllib.parse import parse_qsl, urlsplit

import pandas as pd
import pytest
import streamlit as st
from streamlit.testing.v1 import AppTest

from rollout_core.corpus.engine import run_corpus
from rollout_core.data.sentiment import generate

ROOT = Path(__file__).resolve().parents[1]
MARKUP = "<img src=x onerror=alert(1)> was rude."


def _corpus(n: int, seed: int = 3) -> pd.DataFrame:
    rows = generate(n, seed=seed)
    texts = [r.text for r in rows]
    texts[0] = MARKUP
    return pd.DataFrame({"id": [f"r{i}" for i in range(n)], "text": texts, "label": [r.label for r in rows]})


@pytest.fixture(autouse=True)
def _fresh_caches() -> None:
    st.cache_resource.clear()


@pytest.fixture(scope="module")
def corpus_root(tiny_handle, tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("corpus-root")
    quiet = lambda done, total: None  # noqa: E731
    run_corpus(tiny_handle("bert"), _corpus(30), root / "a-rollout", progress=quiet)
    run_corpus(tiny_handle("bert"), _corpus(30), root / "b-attention", method="attention", progress=quiet)
    run_corpus(tiny_handle("bert"), _corpus(20, seed=9), root / "c-other-data", progress=quiet)
    return root


def _compare_view(root: Path, monkeypatch: pytest.MonkeyPatch, a: str, b: str) -> AppTest:
    monkeypatch.setenv("ROLLOUT_CORPUS_DIR", str(root))
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=120).switch_page("app_pages/corpus.py").run()
    at.radio[0].set_value("Compare two runs").run()
    picks = {s.label: s for s in at.selectbox}
    picks["Run A"].set_value(a)
    picks["Run B"].set_value(b)
    return at.run()


def _links(at: AppTest) -> list[str]:
    return [e.proto.url for e in at.get("link_button")]


def _follow(query: dict[str, str]) -> AppTest:
    """The Compare page opened from a link with `query`, in a fresh session."""
    st.cache_resource.clear()
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=120)
    for key, value in query.items():
        at.query_params[key] = value
    at = at.switch_page("app_pages/compare.py").run()
    assert not at.exception, [str(e.value) for e in at.exception]
    return at


def test_two_runs_compared_on_the_page(corpus_root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    at = _compare_view(corpus_root, monkeypatch, "a-rollout", "b-attention")
    assert not at.exception, [str(e.value) for e in at.exception]
    assert not at.error, [str(e.value) for e in at.error]
    shown = "".join(str(m.value) for m in at.markdown)
    assert "30 rows · predictions agree on 100.0%" in shown and "Spearman median" in shown
    assert "<img" not in shown and "onerror" in shown  # the row's markup shown as text
    assert len(at.dataframe) >= 3 and len(at.get("plotly_chart")) >= 2
    assert [b for b in at.get("download_button") if "report" in b.proto.label]
    links = _links(at)
    assert links and all(link.startswith("compare?") for link in links)
    query = dict(parse_qsl(urlsplit(links[0]).query))
    assert query["mode"] == "methods" and query["method"] == "rollout" and query["b_method"] == "attention"
    assert "tiny-bert" in query["model"] and query["modality"] == "text" and query["text"]


def test_the_link_opens_compare_with_both_sides_set(corpus_root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    link = _links(_compare_view(corpus_root, monkeypatch, "a-rollout", "b-attention"))[0]
    query = dict(parse_qsl(urlsplit(link).query))
    at = _follow(query)
    assert at.session_state["mode"] == "methods"
    assert at.session_state["method"] == "rollout" and at.session_state["b_method"] == "attention"
    assert at.session_state["model"] == query["model"] and at.session_state["text"] == query["text"]
    assert len([m for m in at.markdown if "rollout" in str(m.value) or "attention" in str(m.value)]) >= 2


def test_the_view_is_kept_in_the_link(corpus_root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    at = _compare_view(corpus_root, monkeypatch, "a-rollout", "b-attention")
    query = {k: (v[0] if isinstance(v, list) else v) for k, v in at.query_params.items()}
    assert query["source"] == "Compare two runs" and query["run_a"] == "a-rollout"
    assert query.get("run_b", "b-attention") == "b-attention"  # the newest but one is B's default: not written
    st.cache_resource.clear()
    fresh = AppTest.from_file(str(ROOT / "app.py"), default_timeout=120)
    for key, value in {**query, "run_b": "../../etc"}.items():  # a link naming a folder that is not listed
        fresh.query_params[key] = value
    fresh = fresh.switch_page("app_pages/corpus.py").run()
    assert not fresh.exception
    assert any("not one of the choices" in str(w.value) for w in fresh.warning)
    picks = {s.label: s.value for s in fresh.selectbox}
    assert picks["Run A"] == "a-rollout" and picks["Run B"] in ("a-rollout", "b-attention", "c-other-data")


@pytest.mark.slow  # three runs and three page loads: ~6 s
def test_runs_of_two_models_open_compare_on_both_models(tiny_handle, tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """Two models: the link opens Compare's "two models" mode with both set; when the runs' methods differ too, the
    page says that Compare runs A's method on both (it compares two models under one method)."""
    root = tmp_path / "runs"
    quiet = lambda done, total: None  # noqa: E731
    run_corpus(tiny_handle("bert"), _corpus(12), root / "bert-rollout", progress=quiet)
    run_corpus(tiny_handle("roberta"), _corpus(12), root / "roberta-rollout", progress=quiet)
    run_corpus(tiny_handle("roberta"), _corpus(12), root / "roberta-attention", method="attention", progress=quiet)
    at = _compare_view(root, monkeypatch, "bert-rollout", "roberta-rollout")
    assert not at.exception and not at.error, [str(e.value) for e in [*at.exception, *at.error]]
    query = dict(parse_qsl(urlsplit(_links(at)[0]).query))
    assert query["mode"] == "models" and query["method"] == "rollout"
    assert "tiny-bert" in query["model"] and "tiny-roberta" in query["model_b"]
    assert not [c for c in at.caption if "A's method" in str(c.value)]
    followed = _follow(query)
    assert followed.session_state["mode"] == "models" and followed.session_state["model_b"] == query["model_b"]
    st.cache_resource.clear()
    mixed = _compare_view(root, monkeypatch, "bert-rollout", "roberta-attention")
    shown = [str(c.value).replace("\\", "") for c in mixed.caption]  # as rendered: Markdown escapes dropped
    assert [c for c in shown if "A's method (rollout)" in c and "B's run used attention" in c], shown


def test_runs_over_different_data_are_refused_with_the_reason(corpus_root: Path,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    at = _compare_view(corpus_root, monkeypatch, "a-rollout", "c-other-data")
    assert not at.exception
    errors = [str(e.value) for e in at.error]
    assert len(errors) == 1 and "cover different rows" in errors[0] and "30 rows" in errors[0]
    assert not at.get("plotly_chart") and not _links(at)


def test_fewer_than_two_runs_says_how_to_make_them(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ROLLOUT_CORPUS_DIR", str(tmp_path))
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=120).switch_page("app_pages/corpus.py").run()
    at.radio[0].set_value("Compare two runs").run()
    assert not at.exception
    assert any("two result folders" in str(i.value) for i in at.info)


def test_image_runs_on_the_page(tiny_handle, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from PIL import Image

    from rollout_core.corpus.reader import read_corpus
    from rollout_core.data import shapes

    for i, example in enumerate(shapes.generate(6, seed=2, size=32)):
        (tmp_path / "data" / example.label).mkdir(parents=True, exist_ok=True)
        Image.fromarray(example.image).save(tmp_path / "data" / example.label / f"{i}.png")
    corpus = read_corpus(tmp_path / "data")
    root = tmp_path / "runs"
    for method in ("rollout", "attention"):
        run_corpus(tiny_handle("vit"), corpus, root / f"vit-{method}", method=method, progress=lambda d, t: None)
    at = _compare_view(root, monkeypatch, "vit-rollout", "vit-attention")
    assert not at.exception, [str(e.value) for e in at.exception]
    assert not at.error
    titles = [c.proto.spec for c in at.get("plotly_chart")]
    assert any("mean share B - A per patch" in spec for spec in titles)  # the class's mean difference map
    assert not _links(at)  # image rows cannot be opened in Compare: the run does not keep the image
