"""Issue 16, links from strangers: settings that lower safety are never read from the URL, numbers from the URL
are clamped with a visible note (never a traceback), and URL-derived text shown through Streamlit Markdown is
escaped by the one helper, app_pages._lib.safe.safe_text."""
from __future__ import annotations

import os
import re
import shutil
from pathlib import Path
from typing import Callable

import pytest
import torch
from page_views import page
from safetensors.torch import load_file

from app_pages._lib.safe import ZERO_WIDTH, safe_text

HOSTILE = ("[Session expired - click to re-login](http://evil.example/login) "
           "![](http://evil.example/pixel.png) $$\\huge X$$ <img src=x> www.evil.example")


def _unescaped(text: str, pattern: str) -> bool:
    """True when `pattern` (a regex on one character) occurs in `text` not preceded by a backslash escape."""
    return re.search(r"(?<!\\)" + pattern, text) is not None


def assert_inert(text: str) -> None:
    """No Markdown link, image, maths, inline HTML or auto-link can be formed from `text`."""
    for active in (r"\[", r"\]", r"\(", r"\)", r"\$", r"<", r"!"):
        assert not _unescaped(text, active), (active, text)
    assert "://" not in text and "www." not in text and "\n" not in text


def test_safe_text_escapes_links_images_maths_and_autolinks() -> None:
    out = safe_text(HOSTILE + "\n# heading")
    assert_inert(out)
    # the visible characters are all kept: removing the escapes gives back the text (newline -> space)
    assert re.sub(r"\\(.)", r"\1", out.replace(ZERO_WIDTH, "")) == (HOSTILE + " # heading")
    assert safe_text("ROLLOUT_ALLOWED_MODEL_ROOTS is set") == "ROLLOUT_ALLOWED_MODEL_ROOTS is set"
    assert safe_text("# big").startswith("\\#")


@pytest.mark.filterwarnings("ignore:loading pickle weights")
def test_a_link_cannot_tick_the_pickle_opt_in(tiny_model_dir: Callable[[str], Path], tmp_path: Path) -> None:
    folder = Path(shutil.copytree(tiny_model_dir("bert"), tmp_path / "pickled"))
    torch.save(load_file(str(folder / "model.safetensors")), folder / "pytorch_model.bin")
    (folder / "model.safetensors").unlink()
    at = page("app_pages/text.py", model=str(folder), model_pickle="1", text="the cat sat")
    assert not at.exception
    assert at.sidebar.checkbox(key="model_pickle").value is False
    assert "model_pickle" not in at.query_params
    assert len(at.error) == 1 and "pickle" in at.error[0].value  # refused, as without the parameter
    at.sidebar.checkbox(key="model_pickle").check().run()  # the explicit click still works...
    assert not at.exception and not at.error
    assert "model_pickle" not in at.query_params  # ...and is not written into a shareable link


@pytest.mark.parametrize("key, raw, expected", [
    ("residual", "3.05", 3.0), ("residual", "-1", 0.0), ("residual", "inf", 1.0), ("residual", "nan", 1.0),
    ("residual", "1e308", 3.0), ("discard", "1.0", 0.95), ("discard", "-0.5", 0.0), ("start", "-3", 0),
    ("start", "1e308", 1), ("start", "1.5", 0), ("start", "six", 0),
])  # start: the tiny bert's last layer is 1 (the widget's range is the model's, options.OPTIONS' layer range)
def test_out_of_range_numbers_in_the_url_are_clamped_with_a_note(
        key: str, raw: str, expected: float, tiny_model_dir: Callable[[str], Path]) -> None:
    at = page("app_pages/text.py", model=str(tiny_model_dir("bert")), text="a good film", **{key: raw})
    assert not at.exception, [e.value for e in at.exception]
    widget = at.sidebar.number_input(key=key) if key == "start" else at.sidebar.slider(key=key)
    assert widget.value == pytest.approx(expected)
    notes = [w.value for w in at.sidebar.warning]
    assert any(f"{key}=" in n for n in notes), notes


@pytest.mark.parametrize("raw, expected", [("0", 2), ("1000000", 100), ("-3", 2), ("inf", 10)])
def test_evaluate_limit_from_the_url_is_clamped(raw: str, expected: int,
                                               tiny_model_dir: Callable[[str], Path]) -> None:
    at = page("app_pages/evaluate.py", model=str(tiny_model_dir("bert")), limit=raw)
    assert not at.exception, [e.value for e in at.exception]
    assert at.slider(key="limit").value == expected
    assert any("limit=" in w.value for w in at.warning)


def test_compare_b_settings_are_clamped(tiny_model_dir: Callable[[str], Path]) -> None:
    at = page("app_pages/compare.py", model=str(tiny_model_dir("bert")), text="a good film", b_residual="1e308",
              b_discard="-1", b_start="inf")
    assert not at.exception, [e.value for e in at.exception]
    assert at.sidebar.slider(key="b_residual").value == pytest.approx(3.0)
    assert at.sidebar.slider(key="b_discard").value == pytest.approx(0.0)
    assert at.sidebar.number_input(key="b_start").value == 0


def test_opacity_from_the_url_is_clamped(tiny_model_dir: Callable[[str], Path]) -> None:
    at = page("app_pages/image.py", model=str(tiny_model_dir("vit")), opacity="1e308")
    assert not at.exception, [e.value for e in at.exception]
    assert at.session_state["opacity"] == pytest.approx(1.0)


def test_a_hostile_target_is_escaped_in_the_error_box(tiny_model_dir: Callable[[str], Path]) -> None:
    at = page("app_pages/text.py", model=str(tiny_model_dir("bert")), text="a good film", method="gradient",
              target=HOSTILE)
    assert not at.exception
    assert at.error, "an unknown target is refused"
    for box in at.error:
        assert_inert(box.value)


def test_a_hostile_model_name_is_escaped_in_the_error_box(tmp_path: Path) -> None:
    at = page("app_pages/text.py", model=HOSTILE)
    assert not at.exception
    assert at.error
    for box in at.error:
        assert_inert(box.value)


def test_a_hostile_cut_point_is_escaped(tiny_model_dir: Callable[[str], Path]) -> None:
    at = page("app_pages/text.py", model=str(tiny_model_dir("bert")), text="x")
    at.text_area(key="text").set_value((HOSTILE + " ") * 200).run()
    assert not at.exception
    cut = [w.value for w in at.warning if "longer than the model's limit" in w.value]
    assert cut
    assert_inert(cut[0].split("ends with:", 1)[1])


@pytest.mark.slow
def test_a_model_name_from_a_link_does_not_probe_the_servers_folders(
        tiny_model_dir: Callable[[str], Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 30: under ROLLOUT_ALLOWED_MODEL_ROOTS, names outside the roots get the same message whether or not
    they exist in the server's working folder (`tests/browser` and `tests/nonexist` used to differ, and `NAME/..`
    told whether the folder NAME exists)."""
    root, work = tmp_path / "allowed", tmp_path / "work"
    root.mkdir()
    shutil.copytree(tiny_model_dir("bert"), work / "present" / "model")
    (work / "present" / "notes.txt").write_text("a file")
    monkeypatch.chdir(work)
    monkeypatch.setenv("ROLLOUT_ALLOWED_MODEL_ROOTS", str(root))

    def shown(name: str) -> str:
        at = page("app_pages/text.py", model=name, text="a cat sat")
        assert not at.exception, [e.value for e in at.exception]
        assert len(at.error) == 1, (name, [e.value for e in at.error])
        return at.error[0].value.replace(re.sub(r"([\\`*_{}\[\]()#+\-.!|<>$])", r"\\\1", name), "NAME") \
            .replace(name, "NAME")

    hub_shaped = {name: shown(name) for name in ("present", "absent", "present/model", "absent/model",
                                                 "present/notes.txt")}
    assert len(set(hub_shaped.values())) == 1, hub_shaped
    assert "outside the allowed" not in next(iter(hub_shaped.values()))  # taken as hub ids: never looked up here
    climbs = {name: shown(name) for name in ("present/..", "absent/..", "present/model/..", "present/notes.txt/..")}
    assert len(set(climbs.values())) == 1, climbs
    assert "outside the allowed" in next(iter(climbs.values()))
    monkeypatch.setenv("ROLLOUT_ALLOWED_MODEL_ROOTS", f"{root}{os.pathsep}{work}")  # inside the roots: found
    at = page("app_pages/text.py", model="present/model", text="a cat sat")
    assert not at.exception and not at.error, [e.value for e in at.error]
