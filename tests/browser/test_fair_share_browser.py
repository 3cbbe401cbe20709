"""Issue 30, fair share in a real browser: one visitor with two tabs of long computations holds one heavy slot, not
both, so another visitor's long computation starts at once instead of waiting (and being refused after 30 s).

Visitors are browsers (separate Playwright contexts: their own cookies); the tabs of one context are one visitor.
The computations are attention flows on a text of 300 words through a 24-layer tiny BERT, on a server of this
module's own whose compute limit is raised (ROLLOUT_MAX_COMPUTE_SECONDS) so that the flows are long in fact, not
only by the budget's estimate (which is fitted on a loaded machine: on a quiet one such a flow under the default
limit ended before the second tab looked, and the test failed); the server stops with the module, so none of its
flows outlives the test into the other browser tests' shared server."""
from __future__ import annotations

import random
import urllib.parse
from pathlib import Path
from typing import Any, Callable

import pytest

pytestmark = pytest.mark.browser

ROOT = Path(__file__).resolve().parents[2]
LIMIT = 1200  # seconds: this module's server refuses nothing the test asks for
WORDS = 300

LOAD = 120_000
WAITING = "Waiting for a free slot"
OWN = "your other long computation"


def _text(seed: int, words: int) -> str:
    rng = random.Random(seed)
    return " ".join(rng.choice("the movie film was good great bad not very and but plot acting".split())
                    for _ in range(words))


@pytest.fixture(scope="module")
def roomy_app_url(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """The real app with the compute limit raised to LIMIT, stopped (with its flows) after this module."""
    import os

    from browser_harness import streamlit_server

    before = os.environ.get("ROLLOUT_MAX_COMPUTE_SECONDS")
    os.environ["ROLLOUT_MAX_COMPUTE_SECONDS"] = str(LIMIT)  # the server copies the environment when it starts
    try:
        with streamlit_server(ROOT / "app.py", tmp_path_factory.mktemp("roomy") / "streamlit.log") as url:
            if before is None:
                os.environ.pop("ROLLOUT_MAX_COMPUTE_SECONDS")
            else:
                os.environ["ROLLOUT_MAX_COMPUTE_SECONDS"] = before
            yield url
    finally:
        if before is not None:
            os.environ["ROLLOUT_MAX_COMPUTE_SECONDS"] = before


def _words(model: Path) -> int:
    """WORDS, checked to be a heavy flow the raised limit accepts."""
    from rollout_core.models.loading import load_model
    from rollout_core.serving import budget

    handle = load_model(str(model))
    seconds = budget.estimate_seconds("flow", budget.workload(handle, _text(0, WORDS), "flow"))
    assert 10 * budget.HEAVY_SECONDS <= seconds <= LIMIT / 2, seconds
    return WORDS


def _flow_url(app_url: str, model: Path, seed: int, words: int) -> str:
    text = _text(seed, words)
    return f"{app_url}/text?model={urllib.parse.quote(str(model))}&method=flow&text={urllib.parse.quote(text)}"


def _shows(tab: Any, text: str) -> bool:
    return bool(tab.evaluate(f"() => document.body.innerText.includes({text!r})"))


def _running(tab: Any) -> None:
    """Wait until the page is at its computation (its spinner; a waiter shows it too)."""
    tab.wait_for_function("() => document.body.innerText.includes('computing flow')", timeout=LOAD)


def test_one_visitor_with_two_tabs_leaves_a_slot_to_another(roomy_app_url: str, browser: Any,
                                                           tiny_model_dir: Callable[[str], Path]) -> None:
    model = tiny_model_dir("bert-deep")
    words = _words(model)
    first, second = browser.new_context(), browser.new_context()
    try:
        tabs = [first.new_page(), first.new_page()]
        tabs[0].goto(_flow_url(roomy_app_url, model, 0, words), timeout=LOAD)
        _running(tabs[0])
        # the visitor's second long computation waits for its first, and says why
        tabs[1].goto(_flow_url(roomy_app_url, model, 1, words), timeout=LOAD)
        tabs[1].wait_for_function(f"() => document.body.innerText.includes({OWN!r})", timeout=LOAD)
        # another visitor is not queued behind the first visitor's two tabs: it starts and is never told to wait
        other = second.new_page()
        other.goto(_flow_url(roomy_app_url, model, 99, words), timeout=LOAD)
        _running(other)
        for _ in range(32):  # 8 s: a waiter is told at once
            assert not _shows(other, WAITING), other.inner_text("body")[-1500:]
            other.wait_for_timeout(250)
    finally:
        first.close()
        second.close()
