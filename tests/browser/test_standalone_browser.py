"""In chromium, from disk (file://, every network request refused): the standalone HTML of an explanation draws
its highlight and bar chart, and its layer slider and raw-attention toggle switch the view."""
from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import rollout_core as rc
from rollout_core.figures import layer_views
from rollout_core.figures._common import SCORE_SCALE, colours_at

pytestmark = pytest.mark.browser

HOSTILE = "the cat <img src=x onerror=alert(1)> sat on the mat"
WAIT = 30_000

SENT = 0.5 * 10 ** (1 - layer_views.DIGITS)
"""Relative precision of the numbers the page carries (rounded to 4 significant digits)."""


def _bars(tab: Any) -> list[float]:
    """The heights of the drawn bars (Plotly's trace data, as the explorer set it from the view's numbers)."""
    return tab.evaluate("() => Array.from(document.querySelector('.lx-figures .js-plotly-plot')._fullData[0].y)")


def _word_bars(expl: Any, row: np.ndarray) -> np.ndarray:
    """The word-level bars the page shows by default, by a naive loop: each word's share is the sum of the shown
    shares of the tokens whose characters overlap it (this tokenizer splits no token across words)."""
    from rollout_core.compare import words

    shown = expl.display_scores(row)
    pieces = [(s, e) for (s, e), special in zip(expl.offsets, expl.special) if not special]
    assert len(pieces) == len(shown)
    out = np.array([sum(v for (s, e), v in zip(pieces, shown) if s < end and e > start and e > s)
                    for _, start, end in words(expl.text)])
    return out / out.sum()


def test_standalone_file_works_offline_and_its_slider_switches_the_view(offline_tab, tiny_model_dir, tmp_path):
    expl = rc.explain_text(rc.load_model(str(tiny_model_dir("bert"))), HOSTILE)
    layers = expl.num_layers
    assert layers >= 2
    path = tmp_path / "view.html"
    expl.to_html(path)

    tab = offline_tab.tab
    tab.goto(path.as_uri())
    tab.wait_for_selector(f".lx-root[data-view='layer-{layers}-cum']", state="attached", timeout=WAIT)
    tab.wait_for_selector(".lx-figures .js-plotly-plot", timeout=WAIT)
    assert np.allclose(_bars(tab), _word_bars(expl, expl.layer_scores[-1]), rtol=SENT, atol=0)
    # each token coloured by the browser as colours_at colours its sent value (per-layer scale: 0 to its top)
    drawn = tab.evaluate("() => Array.from(document.querySelectorAll('.token-highlight .tok'), "
                         "s => [Number(s.dataset.score), getComputedStyle(s).backgroundColor])")
    top = float(_word_bars(expl, expl.layer_scores[-1]).max())
    expected = colours_at(SCORE_SCALE, np.array([v for v, _ in drawn]), 0.0, top)
    assert [bg for _, bg in drawn] == [f"rgb({r}, {g}, {b})" for r, g, b in expected] and len(drawn) > 5
    highlight = tab.locator(".lx-html")
    assert highlight.locator("img").count() == 0 and "<img src=x onerror=alert(1)>" in highlight.inner_text()
    before = highlight.inner_html()

    slider = tab.locator(".lx-root input[type=range]")
    slider.focus()
    slider.press("ArrowLeft")
    tab.wait_for_selector(f".lx-root[data-view='layer-{layers - 1}-cum']", state="attached", timeout=WAIT)
    assert tab.locator(f".token-highlight[data-view='layer-{layers - 1}-cum']").count() == 1
    assert highlight.inner_html() != before
    tab.wait_for_function(f"() => document.querySelector('.lx-value').textContent === 'layer {layers - 1} of {layers}'",
                          timeout=WAIT)
    tab.wait_for_timeout(300)  # Plotly.react of the new bars
    assert np.allclose(_bars(tab), _word_bars(expl, expl.layer_scores[-2]), rtol=SENT, atol=0)

    tab.locator(".lx-toggle input").check()
    tab.wait_for_selector(f".lx-root[data-view='layer-{layers - 1}-raw']", state="attached", timeout=WAIT)
    tab.wait_for_timeout(300)
    assert np.allclose(_bars(tab), _word_bars(expl, expl.layer_attention_scores[-2]), rtol=SENT, atol=0)
    assert not offline_tab.errors, offline_tab.errors
    assert all(url.startswith("file:") for url in offline_tab.requests), offline_tab.requests


def test_one_map_method_shows_the_slider_only_for_the_per_layer_view(browser: Any, tiny_model_dir, tmp_path):
    """AttnLRP is one map of the whole model: a slider over it would move nothing, so it appears only with the
    per-layer (raw) view; a layered method keeps it from the start."""
    handle = rc.load_model(str(tiny_model_dir("bert")))
    context = browser.new_context(viewport={"width": 1200, "height": 900})
    try:
        for method, shown_at_start in (("attnlrp", False), ("rollout", True)):
            path = tmp_path / f"{method}.html"
            rc.explain_text(handle, "the cat sat on the mat", method=method).to_html(path)
            tab = context.new_page()
            tab.goto(path.as_uri())
            tab.wait_for_selector(".lx-root[data-view]", state="attached", timeout=WAIT)
            slider = tab.locator(".lx-root .lx-slider")
            assert slider.is_visible() is shown_at_start, method
            tab.locator(".lx-toggle input").check()
            tab.wait_for_selector(".lx-root[data-view$='-raw']", state="attached", timeout=WAIT)
            assert slider.is_visible(), method
            tab.close()
    finally:
        context.close()
