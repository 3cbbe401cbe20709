"""Issue 30, fair share in a real browser: one visitor with two tabs of long computations holds one heavy slot, not
both, so another visitor's long computation starts at once instead of waiting (and being refused after 30 s).

Visitors are browsers (separate Playwright contexts: their own cookies); the tabs of one context are one visitor.
The computations are attention flows on a text of about 200 tokens through a 24-layer tiny BERT, as long as the
budget's own estimate keeps under 3/4 of the server's 60 s limit (heavy, not refused); closing the contexts stops
them."""
from __future__ import annotations

import random
import time
import urllib.parse
from pathlib import Path
from typing import Any, Callable

import pytest

pytestmark = pytest.mark.browser

LOAD = 120_000
WAITING = "Waiting for a free slot"
OWN = "your other long computation"


def _text(seed: int, words: int) -> str:
    rng = random.Random(seed)
    return " ".join(rng.choice("the movie film was good great bad not very and but plot acting".split())
                    for _ in range(words))


def _words(model: Path) -> int:
    """The most words (of a few lengths) whose flow the budget estimates at under 3/4 of its 60 s limit."""
    from rollout_core.models.loading import load_model
    from rollout_core.serving import budget

    handle = load_model(str(model))
    for words in (300, 250, 220, 200, 180, 160):
        seconds = budget.estimate_seconds("flow", budget.workload(handle, _text(0, words), "flow"))
        if seconds <= 45:
            assert seconds >= 10 * budget.HEAVY_SECONDS, "the flows must run long enough to overlap"
            return words
    raise AssertionError("no text length fits the budget")


def _flow_url(app_url: str, model: Path, seed: int, words: int) -> str:
    text = _text(seed, words)
    return f"{app_url}/text?model={urllib.parse.quote(str(model))}&method=flow&text={urllib.parse.quote(text)}"


def _shows(tab: Any, text: str) -> bool:
    return bool(tab.evaluate(f"() => document.body.innerText.includes({text!r})"))


def _running(tab: Any) -> None:
    """Wait until the page is at its computation (its spinner; a waiter shows it too)."""
    tab.wait_for_function("() => document.body.innerText.includes('computing flow')", timeout=LOAD)


def test_one_visitor_with_two_tabs_leaves_a_slot_to_another(app_url: str, browser: Any,
                                                           tiny_model_dir: Callable[[str], Path]) -> None:
    model = tiny_model_dir("bert-deep")
    words = _words(model)
    first, second = browser.new_context(), browser.new_context()
    try:
        tabs = [first.new_page(), first.new_page()]
        for seed, tab in enumerate(tabs):
            tab.goto(_flow_url(app_url, model, seed, words), timeout=LOAD)
            _running(tab)
        other = second.new_page()
        other.goto(_flow_url(app_url, model, 99, words), timeout=LOAD)
        _running(other)
        other.wait_for_timeout(8000)  # a waiter is told at once; 8 s without a note: it has a slot
        assert not _shows(other, WAITING), other.inner_text("body")[-1500:]
        # one of the first visitor's tabs runs, the other waits for it and says why
        deadline = time.monotonic() + LOAD / 1000
        while not any(_shows(tab, OWN) for tab in tabs) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert any(_shows(tab, OWN) for tab in tabs), [tab.inner_text("body")[-1000:] for tab in tabs]
    finally:
        first.close()
        second.close()
