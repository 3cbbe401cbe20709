"""Issue 26 item 4 where a user meets it (AppTest): a new model or modality opens on that model's measured default
method (a link naming both keeps its method), and dinov2-small opens on its measured best method for photos."""
from __future__ import annotations

import pytest

from rollout_core import methods
from rollout_core.models import measured, registry
from test_pages_apptest import assert_clean, page


def _built(*names: str) -> None:
    for name in names:
        if not registry.is_available(registry.lookup(name)):
            pytest.skip(f"{name} is not built: {registry.SETUP_HINT}")


def test_a_record_can_rank_by_its_own_measures() -> None:
    record = {"methods": {"a": {"pointing_game": 0.9, "mass_lift": 1.1}, "b": {"pointing_game": 0.3, "mass_lift": 1.6},
                          "c": {"pointing_game": 0.5}}}
    assert measured.ranking(record) == ["a", "c", "b"]  # the default: pointing first
    record["ranked_by"] = [["mass_lift", "higher"]]
    assert measured.ranking(record) == ["b", "a", "c"]  # missing counts as worst
    record["ranked_by"] = [["mass_lift", "sideways"]]  # unreadable: the default again
    assert measured.ranking(record) == ["a", "c", "b"]


def test_dinov2_small_opens_on_its_best_method_for_photos() -> None:
    record = measured.figures("dinov2-small")
    assert record is not None and record["dataset"] == "photos"
    lifts = {m: v["mass_lift"] for m, v in record["methods"].items()}
    assert measured.default_method("dinov2-small", methods.names()) == max(lifts, key=lifts.get) != "rollout"


def test_switching_modality_on_compare_opens_each_model_on_its_default() -> None:
    _built("default-text", "default-image")
    at = page("app_pages/compare.py", method="gradient", text="The food was cold.")
    assert_clean(at)
    assert at.selectbox(key="method").value == "gradient"  # a link naming the method keeps it
    at.radio(key="modality").set_value("image").run()
    assert_clean(at)
    assert at.selectbox(key="method").value == measured.default_method("default-image", methods.names())
    at.radio(key="modality").set_value("text").run()
    assert at.selectbox(key="method").value == measured.default_method("default-text", methods.names())


@pytest.mark.slow
def test_the_photo_model_button_opens_on_its_photo_default() -> None:
    _built("default-image", "dinov2-small")
    at = page("app_pages/image.py", example="rocket")
    assert_clean(at)
    at.button(key="switch_photo_model").click().run()
    assert_clean(at)
    assert at.session_state["model"] == "dinov2-small"
    assert at.selectbox(key="method").value == measured.default_method("dinov2-small", methods.names())


def test_a_backbone_without_figures_names_no_check_button(tiny_model_dir) -> None:
    at = page("app_pages/image.py", model=str(tiny_model_dir("dinov2")))
    assert_clean(at)
    captions = " ".join(str(c.value) for c in at.caption)
    assert "Check this map" not in captions and "no prediction a check could follow" in captions
    assert not [b for b in at.button if b.key == "trust_check"]


def test_two_models_on_compare_are_offered_only_methods_both_can_run() -> None:
    """default-image against dinov2-small (no classifier, no fine-tuned blocks) under one shared method: the picker
    offers what runs on both, so the page opens on a map for each side, not on B's refusal of A's default."""
    _built("default-image", "dinov2-small")
    at = page("app_pages/compare.py", modality="image", mode="models", model="default-image",
              model_b="dinov2-small")
    assert_clean(at)
    offered = at.selectbox(key="method").options
    assert offered and not {"alti_tuned", "gradient", "attnlrp"} & {o.split(" · ")[0] for o in offered}
    assert not {methods.display_name(m) for m in ("alti_tuned", "gradient", "attnlrp")} & {
        o.split(" · ")[0] for o in offered}


def test_a_link_naming_a_method_that_cannot_run_here_says_why(tiny_model_dir) -> None:
    model = str(tiny_model_dir("bert"))
    at = page("app_pages/text.py", model=model, method="alti_tuned", text="the cat sat")
    assert_clean(at)
    captions = " ".join(str(c.value) for c in at.caption)
    # the method's own refusal, not a generic "not one of the choices"
    assert "cannot run here: ALTI rollout over the fine-tuned blocks needs a model whose fine-tuned blocks are " \
           "recorded" in captions
    assert not [w for w in at.warning if "not one of the choices" in str(w.value)]
    assert at.selectbox(key="method").value == measured.default_method(model, methods.names())


def test_a_link_naming_no_method_at_all_gets_the_default_with_a_note(tiny_model_dir) -> None:
    model = str(tiny_model_dir("bert"))
    at = page("app_pages/text.py", model=model, method="nope", text="the cat sat")
    assert_clean(at)
    assert any("method=nope is not one of the choices" in str(w.value) for w in at.warning)
    assert at.selectbox(key="method").value == measured.default_method(model, methods.names())
