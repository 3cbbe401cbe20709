"""Issue 26 in headless chromium, where a user meets it: the view is final unless the user chose a layer (a link that
names one keeps it, a new method shows the final map again), the address bar follows the slider at once, and
Compare's sides each reach their own final map."""
from __future__ import annotations

from typing import Any

import pytest

from rollout_core.models import registry

pytestmark = pytest.mark.browser

LOAD = 120_000  # ms: a cold model load on a busy machine
STEP = 30_000
SLIDER = ".lx-root .lx-slider:not(.lx-control) input[type=range]"
TITLES = "() => [...document.querySelectorAll('.lx-figures .gtitle')].map(t => t.textContent)"


def _model(name: str) -> str:
    if not registry.is_available(registry.lookup(name)):
        pytest.skip(f"{name} is not built: {registry.SETUP_HINT}")
    return name


def _idle(tab: Any) -> None:
    tab.wait_for_function("() => !document.querySelector('[data-testid=\"stStatusWidget\"]')", timeout=LOAD)


@pytest.fixture
def tab(browser: Any) -> Any:
    context = browser.new_context(viewport={"width": 1400, "height": 1100})
    yield context.new_page()
    context.close()


def _pick(tab: Any, label: str, option: str) -> None:
    """Choose `option` in the sidebar select box labelled `label`."""
    box = tab.get_by_test_id("stSidebar").get_by_role("combobox", name=label)
    box.click()
    tab.get_by_role("option").filter(has_text=option).first.click()


def test_a_linked_layer_is_kept_the_url_follows_at_once_and_a_new_method_is_final(app_url: str, tab: Any) -> None:
    model = _model("default-text")
    tab.goto(f"{app_url}/text?model={model}&method=rollout&layer=2", timeout=LOAD)
    tab.wait_for_selector(".token-highlight[data-view='layer-2-cum']", state="attached", timeout=LOAD)
    _idle(tab)
    slider = tab.locator(SLIDER)
    top = int(slider.get_attribute("max"))
    assert tab.locator(".lx-value").first.inner_text() == f"layer 2 of {top}"
    slider.focus()
    slider.press("ArrowRight")
    # written by the slider's own handler, before any answer from the server
    assert "layer=3" in tab.evaluate("location.search")
    tab.wait_for_function(f"() => ({TITLES})().includes('Attention rollout up to layer 3 of {top}')", timeout=STEP)
    _pick(tab, "Method", "Raw attention")
    tab.wait_for_function("() => !location.search.includes('layer=')", timeout=LOAD)
    tab.wait_for_selector(f".token-highlight[data-view='layer-{top}-cum']", state="attached", timeout=LOAD)
    assert tab.locator(".lx-value").first.inner_text() == f"layer {top} of {top}"


def test_compare_sides_of_different_depths_each_end_on_their_final_map(app_url: str, tab: Any) -> None:
    model = _model("default-image")
    # ALTI over the fine-tuned blocks covers the top layers only; rollout all of them
    tab.goto(f"{app_url}/compare?modality=image&model={model}&method=alti_tuned&b_method=rollout", timeout=LOAD)
    tab.wait_for_selector(".lx-figures .js-plotly-plot", state="attached", timeout=LOAD)
    _idle(tab)
    slider = tab.locator(SLIDER)
    top = int(slider.get_attribute("max"))
    assert top > 2  # the deeper side's layers, not the shallower one's
    tab.wait_for_function(f"() => ({TITLES})().filter(t => t.endsWith('(final)')).length === 2", timeout=STEP)
    slider.focus()
    slider.press("Home")
    tab.wait_for_function(f"() => ({TITLES})().some(t => t.includes('rollout up to layer 1 of {top}'))",
                          timeout=STEP)
    assert not any(t.endswith("(final)") for t in tab.evaluate(TITLES))
