"""The method picker's measured figures and default, the trust line under the map, "Check this map", and the
image page's warning for images far from the shapes (AppTest; tiny models registered under a name)."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import streamlit as st
from streamlit.testing.v1 import AppTest

from rollout_core import methods
from rollout_core.models import measured, registry

APP = str(Path(__file__).resolve().parents[1] / "app.py")
RECORD = {"model": "tiny-bert", "dataset": "text", "examples": 7, "date": "2026-01-02",
          "methods": {"rollout": {"pointing_game": 0.05, "deletion_auc": 0.54},
                      "gradient": {"pointing_game": 0.88, "deletion_auc": 0.52},
                      "attention": {"pointing_game": 0.88, "deletion_auc": 0.515}},
          "random": {"pointing_game": 0.18, "deletion_auc": 0.70}}


@pytest.fixture
def tiny_bert(tiny_model_dir, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """tiny-bert as a registry model, with an empty folder of records (the test writes one if it needs it)."""
    st.cache_resource.clear()
    folder = tiny_model_dir("bert")
    entry = registry.RegistryEntry("tiny-bert", "bert", "text-classification", "text", "test model",
                                   embedded=True, locate=lambda: folder)
    monkeypatch.setattr(registry, "EMBEDDED", (*registry.EMBEDDED, entry))
    records = tmp_path / "records"
    records.mkdir()
    monkeypatch.setattr(measured, "MEASURED_DIR", records)
    return records


def page(path: str, **query: str) -> AppTest:
    at = AppTest.from_file(APP, default_timeout=180)
    for key, value in query.items():
        at.query_params[key] = value
    return at.switch_page(path).run()


def captions(at: AppTest) -> list[str]:
    return [str(c.value) for c in at.caption]


def method_box(at: AppTest) -> Any:
    return next(s for s in at.selectbox if s.key == "method")


def test_picker_starts_on_the_measured_best_and_shows_the_figures(tiny_bert: Path) -> None:
    (tiny_bert / "tiny-bert.json").write_text(json.dumps(RECORD), encoding="utf-8")
    at = page("app_pages/text.py", model="tiny-bert", text="a good film")
    assert not at.exception and not at.error, [str(e.value) for e in at.error]
    box = method_box(at)
    assert box.value == "attention"  # tie with gradient on pointing (0.88), lower deletion (0.515 < 0.52)
    titles = {m: methods.get(m).title for m in methods.names()}
    assert f"{titles['attention']} · pointing 0.88 · deletion 0.52" in box.options  # 0.515 shown to 2 digits
    assert f"{titles['rollout']} · pointing 0.05 · deletion 0.54" in box.options
    assert titles["flow"] in box.options  # not measured: the title alone
    assert any("Figures measured on 7 generated sentences, 2026-01-02" in c for c in captions(at))
    line = next(c for c in captions(at) if c.startswith("On 7 generated sentences"))
    assert line.startswith("On 7 generated sentences with known deciding words, this method's top token is a deciding "
                           "word 88% of the time; random 18%. Removing its top tokens first lowers the prediction "
                           "with a deletion AUC of 0.52 (random 0.70; lower is faster).")  # 0.515 to 2 digits
    assert "not whether a position argues for or against the class" in line  # attention is class-agnostic
    assert "method" not in at.query_params  # the default stays out of the URL


def test_a_method_named_by_the_url_wins_and_gets_its_own_line(tiny_bert: Path) -> None:
    (tiny_bert / "tiny-bert.json").write_text(json.dumps(RECORD), encoding="utf-8")
    at = page("app_pages/text.py", model="tiny-bert", text="a good film", method="rollout")
    assert method_box(at).value == "rollout"
    assert any("top token is a deciding word 5% of the time; random 18%." in c for c in captions(at))


def test_the_line_sets_deletion_beside_integrated_gradients_and_says_which_maps_have_no_direction(
        tiny_bert: Path) -> None:
    record = {**RECORD, "methods": {**RECORD["methods"],
                                    "integrated_gradients": {"pointing_game": 0.8, "deletion_auc": 0.345}}}
    (tiny_bert / "tiny-bert.json").write_text(json.dumps(record), encoding="utf-8")
    at = page("app_pages/text.py", model="tiny-bert", text="a good film", method="gradient")
    line = next(c for c in captions(at) if c.startswith("On 7 generated sentences"))
    assert line.endswith("deletion AUC of 0.52 (integrated gradients 0.34, random 0.70; lower is faster).")
    at = page("app_pages/text.py", model="tiny-bert", text="a good film", method="rollout")
    line = next(c for c in captions(at) if c.startswith("On 7 generated sentences"))
    assert "(integrated gradients 0.34, random 0.70; lower is faster). It shows where information flows" in line


def test_without_measurements_rollout_and_the_check_on_request(tiny_bert: Path) -> None:
    at = page("app_pages/text.py", model="tiny-bert", text="a good film")
    assert method_box(at).value == "rollout"
    assert not any("deletion AUC of" in c for c in captions(at))  # nothing computed before the click
    button = next(b for b in at.button if b.label == "Check this map")
    button.click().run()
    assert not at.exception and not at.error, [str(e.value) for e in at.error]
    line = next(c for c in captions(at) if "On this input" in c)
    assert "deletion AUC of" in line and "10 random orderings" in line and "chance" in line
    at.run()  # a rerun keeps the result without another click
    assert any("On this input" in c for c in captions(at))


def _default(name: str) -> str:
    entry = registry.lookup(name)
    if not registry.is_available(entry):
        pytest.skip(f"{name} is not built: {registry.SETUP_HINT}")
    return name


@pytest.mark.slow
def test_a_photo_on_default_image_is_flagged_and_one_click_switches_to_dinov2(tmp_path, monkeypatch) -> None:
    st.cache_resource.clear()
    model = _default("default-image")
    _default("dinov2-small")
    monkeypatch.setattr(measured, "MEASURED_DIR", tmp_path)  # no records: the page's defaults stay rollout
    at = page("app_pages/image.py", model=model, example="chelsea")
    assert not at.exception and not at.error, [str(e.value) for e in at.error]
    warning = " ".join(str(w.value) for w in at.warning)
    assert "Out of domain" in warning and "trained on generated shapes only" in warning and "features" in warning
    at.button(key="switch_photo_model").click().run()
    assert not at.exception and not at.error, [str(e.value) for e in at.error]
    assert at.session_state["model"] == "dinov2-small"
    assert not any("trained on generated shapes" in str(w.value) for w in at.warning)
    shapes = page("app_pages/image.py", model=model, example="shapes-triangle")
    assert not any("trained on generated shapes" in str(w.value) for w in shapes.warning)
