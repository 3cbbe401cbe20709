"""Page logic through Streamlit's AppTest: every page on working models, bad inputs, URL round-trip, caching.

Tiny random-weight models (tests/tiny_models.py) keep most tests fast; the default models are used where
the test is about them (skipped with a reason when `python -m rollout_core setup` has not been run).
"""
from __future__ import annotations

import io
from pathlib import Path
from typing import Any, Callable

import numpy as np
import pytest
import streamlit as st
from PIL import Image
from streamlit.testing.v1 import AppTest

from rollout_core.models import registry

APP = str(Path(__file__).resolve().parents[1] / "app.py")
TIMEOUT = 120
MARKUP = "<img src=x onerror=alert(1)> was rude"


@pytest.fixture(autouse=True)
def _fresh_caches() -> None:
    """Page caches are per process; each test starts cold so call counts and errors are its own."""
    st.cache_resource.clear()


def page(path: str, **query: str) -> AppTest:
    at = AppTest.from_file(APP, default_timeout=TIMEOUT)
    for key, value in query.items():
        at.query_params[key] = value
    return at.switch_page(path).run()


def texts(elements: Any) -> list[str]:
    return [str(e.value) for e in elements]


def assert_clean(at: AppTest) -> None:
    """No uncaught exception reached Streamlit (a traceback on the page)."""
    assert not at.exception, texts(at.exception)


def html_of(at: AppTest) -> str:
    return "".join(h.proto.body for h in at.get("html"))


def png(array: np.ndarray) -> bytes:
    out = io.BytesIO()
    Image.fromarray(array).save(out, format="PNG")
    return out.getvalue()


def default(name: str) -> str:
    if not registry.is_available(registry.lookup(name)):
        pytest.skip(f"{name} is not built: {registry.SETUP_HINT}")
    return name


@pytest.fixture
def count_calls(monkeypatch: pytest.MonkeyPatch) -> Callable[[str], list[int]]:
    """Wrap a core function of rollout_core.explain so the test sees how often the pages call it."""
    from rollout_core import explain

    def wrap(name: str) -> list[int]:
        calls: list[int] = []
        original = getattr(explain, name)

        def counted(*args: Any, **kwargs: Any) -> Any:
            calls.append(1)
            return original(*args, **kwargs)

        monkeypatch.setattr(explain, name, counted)
        return calls

    return wrap


# ----------------------------------------------------------------------------------------------
# Text page


def test_text_page_default_model_predicts_and_highlights() -> None:
    at = page("app_pages/text.py", model=default("default-text"), text="The food was cold and the waiter was rude.")
    assert_clean(at)
    assert not at.error, texts(at.error)
    prediction = at.get("metric")[0]
    assert prediction.value in ("NEGATIVE", "POSITIVE")
    body = html_of(at)
    assert "token-highlight" in body and ">rude<" in body
    assert len(at.get("plotly_chart")) == 2  # bars, matrix; the head grid waits for its expander
    at.session_state["heads_open"] = True
    at.run()
    assert_clean(at)
    assert len(at.get("plotly_chart")) == 3  # and the head grid


def test_markup_in_text_is_escaped(tiny_model_dir: Callable[[str], Path]) -> None:
    at = page("app_pages/text.py", model=str(tiny_model_dir("bert")), text=MARKUP)
    assert_clean(at)
    body = html_of(at)
    assert "<img" not in body  # no element made from the user's text
    assert ">&lt;<" in body  # the markup is there, as text


@pytest.mark.parametrize("text", ["", "   \n\t "])
def test_empty_text_gives_a_message_and_the_page_keeps_working(text: str, tiny_model_dir: Callable[[str], Path]) -> None:
    at = page("app_pages/text.py", model=str(tiny_model_dir("bert")), text="x")
    at.text_area(key="text").set_value(text).run()
    assert_clean(at)
    assert at.error and "text" in at.error[0].value.lower()
    at.text_area(key="text").set_value("the film was great").run()  # and it recovers
    assert_clean(at)
    assert not at.error and "token-highlight" in html_of(at)


def test_long_text_is_truncated_with_a_note(tiny_model_dir: Callable[[str], Path]) -> None:
    at = page("app_pages/text.py", model=str(tiny_model_dir("bert")), text="x")
    at.text_area(key="text").set_value("good " * 5000).run()
    assert_clean(at)
    assert any("longer than the model's limit" in w for w in texts(at.warning))


def test_model_that_fails_to_load(tmp_path: Path) -> None:
    at = page("app_pages/text.py", model=str(tmp_path / "no-such-model"))
    assert_clean(at)
    assert at.error, "a missing model must say so"
    assert at.sidebar.selectbox(key="model_choice").value == "other"  # the picker is still there to fix it
    at.sidebar.selectbox(key="model_choice").set_value("minilm").run()
    assert_clean(at)
    assert not at.error and "token-highlight" in html_of(at)


def test_unsupported_architecture_is_refused_clearly(tiny_model_dir: Callable[[str], Path]) -> None:
    at = page("app_pages/image.py", model=str(tiny_model_dir("swin")))
    assert_clean(at)
    assert at.error and "window" in at.error[0].value.lower()


def test_unexpected_exception_is_a_short_box_with_details(monkeypatch: pytest.MonkeyPatch,
                                                          tiny_model_dir: Callable[[str], Path]) -> None:
    from rollout_core import explain

    def broken(*args: Any, **kwargs: Any) -> Any:
        raise ValueError("internal detail")

    monkeypatch.setattr(explain, "explain_text", broken)
    at = page("app_pages/text.py", model=str(tiny_model_dir("bert")))
    assert_clean(at)
    assert "Unexpected error" in at.error[0].value and "internal detail" not in at.error[0].value
    assert "internal detail" in "".join(c.value for c in at.expander[0].code)


def test_slider_and_display_options_never_rerun_the_model(count_calls: Callable[[str], list[int]],
                                                          tiny_model_dir: Callable[[str], Path]) -> None:
    calls = count_calls("explain_text")
    at = page("app_pages/text.py", model=str(tiny_model_dir("bert")), text="a good film")
    assert_clean(at)
    assert len(calls) == 1
    shown = html_of(at)
    at.slider(key="layer").set_value(1).run()
    assert 'data-view="layer-1-cum"' in html_of(at) and html_of(at) != shown  # the view did change
    at.toggle(key="layer_raw").set_value(True).run()
    at.checkbox(key="hide_special").set_value(False).run()
    at.session_state["heads_open"] = True  # open the heads
    at.run()
    at.get("button_group")[0].set_value(1).run()  # enlarge head 1
    assert len(at.get("plotly_chart")) == 4  # bars, head grid, the enlarged head, matrix
    assert_clean(at)
    assert len(calls) == 1, "display changes must come from the cache"
    at.sidebar.selectbox(key="method").set_value("attention").run()
    assert len(calls) == 2  # a method change does run the model


def test_settings_round_trip_through_the_query_string(tiny_model_dir: Callable[[str], Path]) -> None:
    model = str(tiny_model_dir("bert"))
    at = page("app_pages/text.py", model=model, method="flow", residual="0.5", discard="0.1", start="1",
              layer="1", text="a bad film")
    assert_clean(at)
    assert at.sidebar.selectbox(key="method").value == "flow"
    assert at.sidebar.slider(key="residual").value == pytest.approx(0.5)
    assert at.sidebar.slider(key="discard").value == pytest.approx(0.1)
    assert at.sidebar.number_input(key="start").value == 1
    assert at.sidebar.text_input(key="model_custom").value == model
    assert at.text_area(key="text").value == "a bad film"
    # a change is written back; a value set back to its default leaves the URL
    at.sidebar.selectbox(key="fusion").set_value("max").run()
    assert at.query_params["fusion"] == ["max"] or at.query_params["fusion"] == "max"
    at.sidebar.slider(key="residual").set_value(1.0).run()
    assert "residual" not in at.query_params
    # a new session with the resulting URL shows the same view
    query = {k: (v[0] if isinstance(v, list) else v) for k, v in at.query_params.items()}
    again = page("app_pages/text.py", **query)
    assert again.sidebar.selectbox(key="fusion").value == "max"
    assert again.sidebar.selectbox(key="method").value == "flow"
    assert html_of(again) == html_of(at)


# ----------------------------------------------------------------------------------------------
# Image page


def test_image_page_bundled_example(tiny_model_dir: Callable[[str], Path]) -> None:
    at = page("app_pages/image.py", model=str(tiny_model_dir("vit")))
    assert_clean(at)
    assert not at.error, texts(at.error)
    assert at.get("metric")[0].value in ("circle", "square", "triangle")
    assert len(at.get("plotly_chart")) == 2  # overlay and patch grid


def test_backbone_says_it_has_no_classifier(tiny_model_dir: Callable[[str], Path]) -> None:
    at = page("app_pages/image.py", model=str(tiny_model_dir("dinov2")))
    assert_clean(at)
    assert any("no classifier" in i for i in texts(at.info))


@pytest.mark.parametrize("name, content, mime", [
    ("notes.png", b"this is not an image at all", "image/png"),
    ("broken.png", png(np.zeros((40, 40, 3), np.uint8))[:60], "image/png"),
    ("empty.png", b"", "image/png"),
])
def test_bad_uploads_give_a_message_and_the_page_keeps_working(name: str, content: bytes, mime: str,
                                                               tiny_model_dir: Callable[[str], Path]) -> None:
    at = page("app_pages/image.py", model=str(tiny_model_dir("vit")))
    at.file_uploader(key="upload").set_value((name, content, mime)).run()
    assert_clean(at)
    assert at.error, f"{name} must be refused with a message"
    at.file_uploader(key="upload").set_value(None).run()  # back to the example: works again
    assert_clean(at)
    assert not at.error and len(at.get("plotly_chart")) == 2


def test_upload_rgba_image(tiny_model_dir: Callable[[str], Path]) -> None:
    rgba = np.zeros((50, 70, 4), np.uint8)
    rgba[10:30, 20:40] = (255, 0, 0, 255)
    at = page("app_pages/image.py", model=str(tiny_model_dir("vit")))
    at.file_uploader(key="upload").set_value(("red.png", png(rgba), "image/png")).run()
    assert_clean(at)
    assert not at.error and len(at.get("plotly_chart")) == 2


def test_image_display_options_never_rerun_the_model(count_calls: Callable[[str], list[int]],
                                                     tiny_model_dir: Callable[[str], Path]) -> None:
    calls = count_calls("explain_image")
    at = page("app_pages/image.py", model=str(tiny_model_dir("vit")))
    at.slider(key="opacity").set_value(0.2).run()
    at.selectbox(key="cmap").set_value("viridis").run()
    at.slider(key="layer").set_value(1).run()
    assert_clean(at)
    assert len(calls) == 1


# ----------------------------------------------------------------------------------------------
# Compare and evaluate pages


def test_compare_one_model_two_methods(tiny_model_dir: Callable[[str], Path]) -> None:
    at = page("app_pages/compare.py", model=str(tiny_model_dir("bert")), text="a good film")
    assert_clean(at)
    assert not at.error, texts(at.error)
    assert html_of(at).count("token-highlight") == 2
    assert [m.label for m in at.get("metric")][-3:] == ["Spearman rank correlation", "Top-3 overlap", "Units compared"]


def test_compare_two_models_with_different_tokenizers(tiny_model_dir: Callable[[str], Path]) -> None:
    at = page("app_pages/compare.py", mode="models", model=str(tiny_model_dir("bert")),
              model_b=str(tiny_model_dir("roberta")), text="a good film")
    assert_clean(at)
    assert not at.error, texts(at.error)
    assert html_of(at).count("token-highlight") == 2
    assert any("aligned onto words by character offsets" in i for i in texts(at.info))


def test_evaluate_page_runs_one_input(tiny_model_dir: Callable[[str], Path]) -> None:
    at = page("app_pages/evaluate.py", model=str(tiny_model_dir("bert")), text="a good film")
    assert_clean(at)
    at.button[0].click().run()
    assert_clean(at)
    assert not at.error, texts(at.error)
    assert at.get("metric") and at.dataframe
