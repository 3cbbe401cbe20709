"""In chromium: the `corpus compare` report from disk (no script errors, no network, tables and plots drawn, the data's
markup shown as text), and the Corpus page's comparison in the real app, its "Open in Compare" link followed."""
from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any, Iterator
from urllib.parse import parse_qsl, urlsplit

import pandas as pd
import pytest

from rollout_core.corpus.compare_report import report_html
from rollout_core.corpus.compare_runs import compare_runs
from rollout_core.corpus.engine import run_corpus
from rollout_core.data.sentiment import generate

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))
from browser_harness import streamlit_server  # noqa: E402

pytestmark = pytest.mark.browser
HOSTILE = "<img src=x onerror=alert(1)> was rude."
WAIT = 60_000
SHOTS = Path(os.environ["ROLLOUT_SCREENSHOTS"]) if os.environ.get("ROLLOUT_SCREENSHOTS") else None
"""A folder to write a screenshot of the page into (only when asked: tests do not rewrite tracked files)."""


@pytest.fixture(scope="module")
def runs(tiny_handle, tmp_path_factory) -> Path:
    rows = generate(40, seed=8)
    texts = [r.text for r in rows]
    texts[1] = HOSTILE
    corpus = pd.DataFrame({"id": [f"r{i}" for i in range(40)], "text": texts, "label": [r.label for r in rows]})
    root = tmp_path_factory.mktemp("browser-runs")
    quiet = lambda done, total: None  # noqa: E731
    run_corpus(tiny_handle("bert"), corpus, root / "a-rollout", progress=quiet)
    run_corpus(tiny_handle("bert"), corpus, root / "b-attention", method="attention", progress=quiet)
    return root


def test_report_opens_offline_without_errors(offline_tab: Any, runs: Path, tmp_path: Path) -> None:
    report = tmp_path / "report.html"
    compared = compare_runs(runs / "a-rollout", runs / "b-attention", examples=40)
    report.write_text(report_html(compared), encoding="utf-8")
    tab = offline_tab.tab
    tab.goto(report.as_uri())
    tab.wait_for_selector("#fig-spearman .main-svg", timeout=WAIT)
    assert tab.locator("table.data").count() >= 3
    assert tab.locator(".js-plotly-plot").count() >= 2  # the histogram and a class's moved words
    assert tab.locator(".pair").count() >= 1 and tab.locator(".pair img").count() == 0
    assert HOSTILE[:28] in tab.locator("body").inner_text()  # the row's markup, shown as its characters
    assert offline_tab.errors == [] and all(url.startswith("file:") for url in offline_tab.requests)


@pytest.fixture(scope="module")
def app_with_runs(runs: Path, tmp_path_factory) -> Iterator[str]:
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("ROLLOUT_CORPUS_DIR", str(runs))
        with streamlit_server(ROOT / "app.py", tmp_path_factory.mktemp("app") / "streamlit.log") as url:
            yield url


def test_page_compares_two_runs_and_opens_a_row_in_compare(browser: Any, app_with_runs: str) -> None:
    tab = browser.new_page(viewport={"width": 1400, "height": 1000})
    errors: list[str] = []
    tab.on("pageerror", lambda err: errors.append(str(err)))
    try:
        tab.goto(f"{app_with_runs}/corpus")
        tab.get_by_text("Compare two runs").click()
        tab.get_by_text("predictions agree on").first.wait_for(timeout=WAIT)
        tab.wait_for_selector(".js-plotly-plot .main-svg", timeout=WAIT)
        assert tab.locator("[data-testid='stException']").count() == 0
        tab.wait_for_function("() => location.search.includes('source=')", timeout=WAIT)
        assert dict(parse_qsl(urlsplit(tab.url).query))["source"] == "Compare two runs"  # the view is in the address
        link = tab.get_by_role("link", name="Open in Compare").first
        href = link.get_attribute("href")
        assert href and "compare?" in href and "mode=methods" in href  # newest run first: A is b-attention
        assert {"method=attention", "b_method=rollout"} <= set(href.split("?")[1].split("&"))
        if SHOTS:
            tab.screenshot(path=str(SHOTS / "corpus_compare.png"), full_page=True)
        tab.goto(f"{app_with_runs}/{href.split('/')[-1]}")
        tab.get_by_text("B: ").first.wait_for(timeout=WAIT)
        page = tab.locator("body").inner_text()
        assert "rollout" in page and "attention" in page
        assert tab.locator("[data-testid='stException']").count() == 0 and errors == []
        # a link with the runs swapped (not the defaults) opens the view with them: A is a-rollout now
        tab.goto(f"{app_with_runs}/corpus?source=Compare+two+runs&run_a=a-rollout&run_b=b-attention")
        tab.get_by_text("predictions agree on").first.wait_for(timeout=WAIT)
        href = tab.get_by_role("link", name="Open in Compare").first.get_attribute("href")
        assert {"method=rollout", "b_method=attention"} <= set(href.split("?")[1].split("&")), href
        assert dict(parse_qsl(urlsplit(tab.url).query)).get("run_a") == "a-rollout"
        assert tab.locator("[data-testid='stException']").count() == 0 and errors == []
    finally:
        tab.close()
