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

from page_views import chart_count, explorers, shown_html, view_at
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


html_of = shown_html


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
    """Count how often the pages run the model on inputs of one modality (`Prepared.run`, the step after the input
    is encoded and the cost checked)."""
    from rollout_core import explain

    def wrap(modality: str) -> list[int]:
        calls: list[int] = []
        original = explain.Prepared.run

        def counted(self: Any) -> Any:
            if self.handle.modality == modality:
                calls.append(1)
            return original(self)

        monkeypatch.setattr(explain.Prepared, "run", counted)
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
    assert chart_count(at) == 2  # bars, matrix; the head grid waits for its expander
    at.session_state["heads_open"] = True
    at.run()
    assert_clean(at)
    assert chart_count(at) == 3  # and the head grid


def test_markup_in_text_is_escaped(tiny_model_dir: Callable[[str], Path]) -> None:
    at = page("app_pages/text.py", model=str(tiny_model_dir("bert")), text=MARKUP)
    assert_clean(at)
    body = html_of(at)
    assert "<img" not in body  # no element made from the user's text
    assert ">&lt;<" in body  # the markup is there, as text


@pytest.mark.parametrize("text", ["", "   \n\t "])
def test_empty_text_gives_a_message_and_the_page_keeps_working(text: str,
                                                               tiny_model_dir: Callable[[str], Path]) -> None:
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

    monkeypatch.setattr(explain.Prepared, "run", broken)
    at = page("app_pages/text.py", model=str(tiny_model_dir("bert")))
    assert_clean(at)
    assert "Unexpected error" in at.error[0].value and "internal detail" not in at.error[0].value
    assert "internal detail" in "".join(c.value for c in at.expander[0].code)


def test_raw_attention_method_is_titled_per_layer_not_cumulative(tiny_model_dir: Callable[[str], Path]) -> None:
    at = page("app_pages/text.py", model=str(tiny_model_dir("bert")), text="a good film", method="attention")
    assert_clean(at)
    (data,) = explorers(at)
    assert data["label"] == "Layer"  # nothing accumulates, so the slider does not say "cumulative rollout"
    for k in range(1, data["layers"] + 1):
        assert view_at(data, k, False)["figures"][0]["layout"]["title"]["text"] == \
            f"raw attention of layer {k} of {data['layers']}"
    rollout = page("app_pages/text.py", model=str(tiny_model_dir("bert")), text="a good film")
    assert "cumulative" in explorers(rollout)[0]["label"]


@pytest.mark.parametrize("method", ["flow", "rollout"])
def test_the_text_is_encoded_once_for_the_cost_check_and_the_explanation(
        method: str, monkeypatch: pytest.MonkeyPatch, tiny_model_dir: Callable[[str], Path]) -> None:
    from rollout_core import explain
    from rollout_core.inputs import text as text_inputs
    from rollout_core.serving import budget

    encoded: list[int] = []
    original = text_inputs.encode_texts

    def counted(*args: Any, **kwargs: Any) -> Any:
        encoded.append(len(args[1]))
        return original(*args, **kwargs)

    monkeypatch.setattr(text_inputs, "encode_texts", counted)  # what every other tokenising path calls
    monkeypatch.setattr(explain, "encode_texts", counted)
    checked: list[int] = []
    check = budget.check_prepared
    monkeypatch.setattr(budget, "check_prepared", lambda prepared: checked.append(prepared.tokens) or check(prepared))
    at = page("app_pages/text.py", model=str(tiny_model_dir("bert")), text="a good film", method=method)
    assert_clean(at)
    # [CLS] a good film [SEP]: counted once for the sidebar's estimate (cached per model and text), and once by
    # the request the cost check counts and the explanation runs
    assert encoded == [1, 1] and checked == [5]
    at.checkbox(key="hide_special").set_value(False).run()
    assert encoded == [1, 1] and checked == [5]  # a display change: from the cache, nothing encoded again
    at.sidebar.selectbox(key="method").set_value("attention").run()
    assert encoded == [1, 1, 1] and checked == [5, 5]  # another method: its request only


def test_an_evaluation_counts_its_input_once_for_all_its_methods(monkeypatch: pytest.MonkeyPatch,
                                                                  tiny_model_dir: Callable[[str], Path]) -> None:
    from app_pages._lib import core
    from rollout_core.options import Options
    from rollout_core.serving import budget

    handle = core.load(str(tiny_model_dir("bert")))
    chosen = ("rollout", "flow", "gradient")
    counted: list[int] = []
    original = budget.positions
    monkeypatch.setattr(budget, "positions", lambda *args: counted.append(1) or original(*args))
    seconds = core._evaluation_seconds(handle, "a good film", chosen, Options())
    assert counted == [1]  # was once per method
    monkeypatch.setattr(budget, "positions", original)
    each = sum(budget.check_request(handle, "a good film", m) for m in chosen)
    assert seconds == pytest.approx(max(each, budget.HEAVY_SECONDS))


def test_every_slider_position_is_sent_and_display_options_never_rerun_the_model(
        count_calls: Callable[[str], list[int]], tiny_model_dir: Callable[[str], Path]) -> None:
    calls = count_calls("text")
    at = page("app_pages/text.py", model=str(tiny_model_dir("bert")), text="a good film")
    assert_clean(at)
    assert len(calls) == 1
    (data,) = explorers(at)
    layers = data["layers"]
    assert layers > 1 and (data["layer"], data["raw"]) == (layers, False)  # the final layer first
    assert {m: len(v) for m, v in data["payload"]["views"].items()} == {"cumulative": layers, "raw": layers}
    for k in range(1, layers + 1):
        for raw in (False, True):
            view = view_at(data, k, raw)
            mode = "raw" if raw else "cum"
            assert f'data-view="layer-{k}-{mode}"' in view["html"] and ">good<" in view["html"]
            title = view["figures"][0]["layout"]["title"]["text"]
            final = " (final)" if k == layers else ""
            assert title == (f"raw attention of layer {k} of {layers}" if raw else
                             f"Attention rollout up to layer {k} of {layers}{final}")
            expected = f"raw attention of layer {k}," if raw else f"through {k} layer{'s' if k > 1 else ''},"
            assert expected in view["summary"]
    assert view_at(data, 1)["html"] != view_at(data, layers)["html"]  # the views do differ
    at.session_state["layer"] = 1  # what the browser reports after a move (the URL-backed setting)
    at.session_state["layer_raw"] = True
    at.checkbox(key="hide_special").set_value(False).run()
    assert len(calls) == 1, "display changes must come from the cache"
    # open the heads: drawn here, for the reported layer; every head's attention is kept only while the panel is
    # open (issue 16), so opening it runs the model once more, and then the head views come from the cache
    at.session_state["heads_open"] = True
    at.run()
    assert len(calls) == 2
    assert f"Layer 1 of {layers}." in texts(at.caption)
    at.get("button_group")[0].set_value(1).run()  # enlarge head 1
    assert chart_count(at) == 4  # bars, head grid, the enlarged head, matrix
    assert (explorers(at)[0]["layer"], explorers(at)[0]["raw"]) == (1, True)
    assert_clean(at)
    assert len(calls) == 2, "choosing a head must come from the cache"
    at.sidebar.selectbox(key="method").set_value("attention").run()
    assert len(calls) == 3  # a method change does run the model


def test_without_static_serving_the_page_says_why_the_layer_figures_are_missing(
        tiny_model_dir: Callable[[str], Path]) -> None:
    from streamlit import config

    config.set_option("server.enableStaticServing", False)
    try:
        at = page("app_pages/text.py", model=str(tiny_model_dir("bert")), text="a good film")
    finally:
        config.set_option("server.enableStaticServing", True)
    assert_clean(at)
    assert any("Static file serving is off" in w for w in texts(at.warning))
    (data,) = explorers(at)
    assert data["plotly_url"] == "" and "token-highlight" in html_of(at)  # the rest of the view still works


def test_plotly_js_is_served_from_the_static_folder(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    import plotly
    from streamlit import config

    from app_pages._lib import layer_explorer

    monkeypatch.setattr(layer_explorer, "STATIC_PLOTLY", tmp_path / "static" / "plotly.min.js")
    config.set_option("server.baseUrlPath", "/tools/rollout/")
    try:
        url = layer_explorer.served_plotly_js()
    finally:
        config.set_option("server.baseUrlPath", "")
    assert url == "/tools/rollout/app/static/plotly.min.js"
    source = Path(plotly.__file__).parent / "package_data" / "plotly.min.js"
    assert (tmp_path / "static" / "plotly.min.js").read_bytes() == source.read_bytes()
    assert layer_explorer.served_plotly_js() == "/app/static/plotly.min.js"


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
    assert chart_count(at) == 2  # overlay and patch grid


def test_default_image_slider_holds_only_the_fine_tuned_layers_of_its_default_method() -> None:
    at = page("app_pages/image.py", model=default("default-image"))
    assert_clean(at)
    assert at.selectbox(key="method").value == "alti_tuned"  # the measured default
    assert not any("knockout" in o.lower() for o in at.selectbox(key="method").options)  # a text-only method
    assert any("first fine-tuned layer" in c for c in texts(at.caption))
    data = explorers(at)[0]
    assert data["layer"] == 2  # two slider positions: layers 11 and 12 (the 10 frozen ones are not shown)
    assert "through 2 layers (layers 11-12)" in view_at(data)["summary"]


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
    assert not at.error and chart_count(at) == 2


def test_upload_rgba_image(tiny_model_dir: Callable[[str], Path]) -> None:
    rgba = np.zeros((50, 70, 4), np.uint8)
    rgba[10:30, 20:40] = (255, 0, 0, 255)
    at = page("app_pages/image.py", model=str(tiny_model_dir("vit")))
    at.file_uploader(key="upload").set_value(("red.png", png(rgba), "image/png")).run()
    assert_clean(at)
    assert not at.error and chart_count(at) == 2


def test_upload_says_it_was_resized_to_the_models_input_size(tiny_model_dir: Callable[[str], Path]) -> None:
    from transformers import AutoImageProcessor

    folder = tiny_model_dir("vit")
    pixels = AutoImageProcessor.from_pretrained(folder)(images=Image.new("RGB", (70, 50)), return_tensors="pt")
    height, width = pixels["pixel_values"].shape[-2:]
    assert (width, height) != (70, 50)
    at = page("app_pages/image.py", model=str(folder))
    at.file_uploader(key="upload").set_value(("wide.png", png(np.zeros((50, 70, 3), np.uint8)), "image/png")).run()
    assert_clean(at)
    assert f"Resized from 70x50 to {width}x{height} (the model's input size)." in texts(at.caption)
    same = png(np.zeros((height, width, 3), np.uint8))
    at.file_uploader(key="upload").set_value(("fits.png", same, "image/png")).run()
    assert_clean(at)
    assert not [c for c in texts(at.caption) if c.startswith("Resized")]


def test_image_display_options_never_rerun_the_model(count_calls: Callable[[str], list[int]],
                                                     tiny_model_dir: Callable[[str], Path]) -> None:
    calls = count_calls("image")
    at = page("app_pages/image.py", model=str(tiny_model_dir("vit")), opacity="0.3")
    (first,) = explorers(at)
    (opacity,) = first["controls"]  # the overlay opacity is set in the browser, on the overlay's map trace
    assert (opacity["key"], opacity["value"], opacity["trace"], opacity["attribute"]) == ("opacity", 0.3, "patches",
                                                                                          "opacity")
    assert [t["name"] for t in view_at(first, 1)["figures"][0]["data"]] == ["image", "patches"]
    at.session_state["opacity"] = 0.2  # what the browser reports after a move
    at.session_state["layer"] = 1
    at.run()
    (moved,) = explorers(at)
    assert moved["controls"][0]["value"] == 0.2 and moved["layer"] == 1
    assert moved["payload"]["id"] == first["payload"]["id"]  # the views were not redrawn for it
    at.selectbox(key="cmap").set_value("viridis").run()
    assert_clean(at)
    assert len(calls) == 1
    (data,) = explorers(at)
    assert data["payload"]["id"] != first["payload"]["id"]  # a colour map does redraw them, from the cache
    overlay = view_at(data, 1)["figures"][0]
    assert overlay["data"][1]["colorscale"] == view_at(data, 2)["figures"][1]["data"][0]["colorscale"]
    assert overlay["data"][1]["colorscale"] != view_at(first, 1)["figures"][0]["data"][1]["colorscale"]


# ----------------------------------------------------------------------------------------------
# Compare and evaluate pages


def test_compare_one_model_two_methods(tiny_model_dir: Callable[[str], Path]) -> None:
    at = page("app_pages/compare.py", model=str(tiny_model_dir("bert")), text="a good film")
    assert_clean(at)
    assert not at.error, texts(at.error)
    assert html_of(at).count("token-highlight") == 2
    agreement = html_of(at)[html_of(at).index('class="agreement"'):]
    assert "Spearman rank correlation" in agreement and "top-3 overlap" in agreement


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
    assert at.get("metric") and at.table


def test_flow_pages_say_which_rows_they_hold_and_whether_approximate(tiny_model_dir: Callable[[str], Path]) -> None:
    at = page("app_pages/text.py", model=str(tiny_model_dir("bert")), method="flow", text="a bad film")
    assert_clean(at)
    assert "attention flow: exact; explained row only" in " ".join(c.value for c in at.caption).replace("\\", "")
    assert "the full matrix, not computed unless asked for, is" in " ".join(i.value for i in at.info)
    image = page("app_pages/image.py", model=str(tiny_model_dir("dinov2")), method="flow")
    assert_clean(image)
    shown = " ".join(c.value for c in image.caption).replace("\\", "")
    assert "attention flow: exact here (each row pruned to 80% of its mass; the error bound is 0)" in shown
    assert "full matrix" not in shown
