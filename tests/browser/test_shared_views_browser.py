"""In headless chromium: a shared link after an upload shows that upload to another visitor (or says it is gone),
and the per-layer colour scale keeps a faint last layer visible where one scale for all layers washes it out."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from PIL import Image

from rollout_core.figures.image import IMAGE_TRACE, OVERLAY_TRACE
from rollout_core.models import registry

pytestmark = pytest.mark.browser

LOAD = 120_000  # ms: a cold model load on a busy machine
STEP = 30_000
LAYER = 'input[type=range][aria-label="Layer"]'
# the photo under the overlay (a data URL) and the patch trace's largest value against its colour scale's top
PHOTO = (f"() => [...document.querySelectorAll('.lx-figures .js-plotly-plot')][0]?.data?.find("
         f"t => t.name === {IMAGE_TRACE!r})?.source ?? null")
FILL = ("() => { const t = [...document.querySelectorAll('.lx-figures .js-plotly-plot')][0]?._fullData?.find("
        f"t => t.name === {OVERLAY_TRACE!r}); if (!t) return null; let top = 0; "
        "for (const row of t.z) for (const v of row) if (v > top) top = v; return top / t.zmax; }")


def _image_model() -> str:
    if not registry.is_available(registry.lookup("default-image")):
        pytest.skip(f"default-image is not built: {registry.SETUP_HINT}")
    return "default-image"


def _idle(tab: Any) -> None:
    tab.wait_for_function("() => !document.querySelector('[data-testid=\"stStatusWidget\"]')", timeout=LOAD)


@pytest.fixture
def visitor(browser: Any) -> Any:
    """A fresh browser context per call: each one is another visitor with its own Streamlit session."""
    contexts = []

    def open_tab() -> Any:
        contexts.append(browser.new_context(viewport={"width": 1400, "height": 1000}))
        return contexts[-1].new_page()

    yield open_tab
    for context in contexts:
        context.close()


def test_a_shared_link_after_an_upload_shows_that_upload_or_says_it_is_gone(
        app_url: str, visitor: Any, tmp_path: Path) -> None:
    model = _image_model()
    picture = tmp_path / "striped.png"
    image = Image.new("RGB", (96, 64), (230, 40, 40))
    for x in range(0, 96, 16):
        image.paste((20, 20, 200), (x, 0, x + 8, 64))
    image.save(picture)
    first = visitor()
    first.goto(f"{app_url}/image?model={model}&method=attention", timeout=LOAD)
    first.wait_for_function(f"() => ({PHOTO})() !== null", timeout=LOAD)
    example_photo = first.evaluate(PHOTO)
    first.locator('[data-testid="stFileUploaderDropzoneInput"]').set_input_files(str(picture))
    first.wait_for_function("() => location.search.includes('upload=')", timeout=LOAD)
    _idle(first)
    first.wait_for_function(f"() => ({PHOTO})() !== null && ({PHOTO})() !== {example_photo!r}", timeout=STEP)
    uploaded_photo = first.evaluate(PHOTO)
    link = first.url
    assert "example=" not in link  # the link names the upload, not the bundled example it replaced

    second = visitor()  # another visitor opens the link: the same photo, and a caption naming the upload
    second.goto(link, timeout=LOAD)
    second.wait_for_selector(".image-view", state="attached", timeout=LOAD)
    _idle(second)
    second.wait_for_function(f"() => ({PHOTO})() !== null", timeout=STEP)
    assert second.evaluate(PHOTO) == uploaded_photo
    assert "striped.png" in " ".join(second.get_by_test_id("stCaptionContainer").all_inner_texts())
    assert second.get_by_test_id("stAlertContentError").count() == 0

    gone = visitor()  # a link naming an upload this server lacks: a message, and no other image
    gone.goto(f"{app_url}/image?model={model}&upload=0123456789abcdef&example=chelsea", timeout=LOAD)
    gone.get_by_test_id("stAlertContentError").first.wait_for(timeout=LOAD)
    _idle(gone)
    assert "this server does not have" in gone.get_by_test_id("stAlertContentError").first.inner_text()
    assert gone.locator(".image-view").count() == 0 and gone.locator(".js-plotly-plot").count() == 0


def test_the_per_layer_scale_keeps_the_last_layer_visible(app_url: str, visitor: Any) -> None:
    model = _image_model()
    tab = visitor()
    # raw attention on the cat: the last layer peaks at about a fifth of the strongest layer's peak
    tab.goto(f"{app_url}/image?model={model}&method=attention&example=chelsea", timeout=LOAD)
    tab.wait_for_selector(".image-view", state="attached", timeout=LOAD)
    _idle(tab)
    slider = tab.locator(LAYER)
    slider.focus()
    slider.press("End")
    last = slider.get_attribute("max")
    tab.wait_for_selector(f".image-view[data-view^='layer-{last}']", state="attached", timeout=STEP)
    tab.wait_for_function(f"() => ({FILL})() !== null", timeout=STEP)
    own_scale = tab.evaluate(FILL)
    assert own_scale == pytest.approx(1.0, abs=0.01)  # the last layer's hottest patch is at the top of its scale

    tab.get_by_text("One colour scale for all layers").click()
    tab.wait_for_function("() => location.search.includes('shared_scale')", timeout=LOAD)
    _idle(tab)
    slider = tab.locator(LAYER)
    slider.focus()
    slider.press("End")
    tab.wait_for_selector(f".image-view[data-view^='layer-{last}']", state="attached", timeout=STEP)
    tab.wait_for_function(f"() => ({FILL})() !== null && ({FILL})() < 0.99", timeout=STEP)
    shared = tab.evaluate(FILL)
    assert shared < 0.5  # on one scale for all layers the same patch sits low on the scale: a dark map
