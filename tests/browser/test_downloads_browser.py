"""In chromium: the PNG downloads are valid images of the layer on screen, named after the input."""
from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import TimeoutError as PlaywrightTimeout

from rollout_core.models import registry

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))
from browser_harness import SLIDER as LAYER  # noqa: E402

pytestmark = pytest.mark.browser

LOAD = 120_000
STEP = 30_000
PNG = b"\x89PNG\r\n\x1a\n"


def _model(name: str) -> str:
    if not registry.is_available(registry.lookup(name)):
        pytest.skip(f"{name} is not built: {registry.SETUP_HINT}")
    return name


@pytest.fixture
def page(browser: Any) -> Any:
    context = browser.new_context(viewport={"width": 1400, "height": 1000}, accept_downloads=True)
    yield context.new_page()
    context.close()


def _idle(tab: Any) -> None:
    tab.wait_for_function("() => !document.querySelector('[data-testid=\"stStatusWidget\"]')", timeout=LOAD)


def _download(tab: Any, button: str) -> tuple[str, bytes]:
    """Click `button` until its download starts: a click that lands while a rerun replaces the buttons (the URL
    catching up with the slider starts one) is swallowed, as it would be for a user, who clicks again."""
    for attempt in range(3):
        _idle(tab)
        try:
            with tab.expect_download(timeout=STEP if attempt < 2 else LOAD) as info:
                tab.get_by_role("button", name=button).click()
            break
        except PlaywrightTimeout:
            if attempt == 2:
                raise
    download = info.value
    assert download.failure() is None
    return download.suggested_filename, Path(download.path()).read_bytes()


def _move(tab: Any, key: str, view: str) -> None:
    slider = tab.locator(LAYER)
    slider.focus()
    slider.press(key)
    tab.wait_for_selector(f"[data-view$='{view}']", state="attached", timeout=STEP)
    tab.wait_for_function("() => /[?&]layer=1(&|$)/.test(location.search)", timeout=STEP)  # server caught up
    _idle(tab)
    tab.wait_for_timeout(500)


def test_image_overlay_png_is_the_layer_on_screen(app_url: str, page: Any) -> None:
    model = _model("default-image")
    page.goto(f"{app_url}/image?model={model}&example=shapes-triangle&method=rollout", timeout=LOAD)
    page.wait_for_selector(".image-view", state="attached", timeout=LOAD)
    _idle(page)
    name, last = _download(page, "Overlay (PNG)")
    assert last.startswith(PNG) and name.endswith("_overlay.png") and "shapes-triangle" in name
    _move(page, "Home", "layer-1-cum")
    _, first = _download(page, "Overlay (PNG)")
    assert first.startswith(PNG) and first != last


def test_text_bar_chart_png_is_the_layer_on_screen(app_url: str, page: Any) -> None:
    model = _model("default-text")
    page.goto(f"{app_url}/text?model={model}&text=The+food+was+cold+and+the+waiter+was+rude.", timeout=LOAD)
    page.wait_for_selector(".token-highlight", state="attached", timeout=LOAD)
    _idle(page)
    name, csv = _download(page, "Scores (CSV)")
    from rollout_core import methods
    from rollout_core.models.measured import default_method

    # the measured default method names the file
    assert name == f"{default_method(model, methods.names())}_default-text_the-food-was.csv" and csv
    # the default (a whole-model method) has no layers to move through: rollout has
    page.goto(f"{app_url}/text?model={model}&text=The+food+was+cold+and+the+waiter+was+rude.&method=rollout",
              timeout=LOAD)
    page.wait_for_selector(".token-highlight", state="attached", timeout=LOAD)
    _idle(page)
    _, last = _download(page, "Bar chart (PNG)")
    _move(page, "Home", "layer-1-cum")
    _, first = _download(page, "Bar chart (PNG)")
    assert last.startswith(PNG) and first.startswith(PNG) and first != last
