"""Issue 7, server settings: the upload size bound in .streamlit/config.toml, the allowed model roots and the
pickle opt-in, on the paths not covered elsewhere (the CLI in-process and the pages; the core rules are in
tests/test_model_loading.py)."""
from __future__ import annotations

import shutil
import tomllib
from pathlib import Path
from typing import Callable

import pytest
import streamlit as st
import torch
from safetensors.torch import load_file
from streamlit.testing.v1 import AppTest

from page_views import chart_count
from rollout_core import cli

ROOT = Path(__file__).resolve().parents[1]
APP = str(ROOT / "app.py")


def test_upload_size_is_bounded_in_the_streamlit_config() -> None:
    config = tomllib.loads((ROOT / ".streamlit" / "config.toml").read_text())
    limit = config["server"]["maxUploadSize"]  # megabytes; Streamlit's own default is 200
    assert isinstance(limit, int) and 1 <= limit <= 50


def _text_page(model: str) -> AppTest:
    st.cache_resource.clear()
    at = AppTest.from_file(APP, default_timeout=120)
    at.query_params["model"] = model
    at.query_params["text"] = "the cat sat"
    return at.switch_page("app_pages/text.py").run()


def test_model_folder_outside_the_allowed_roots(tiny_model_dir: Callable[[str], Path], tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture) -> None:
    inside = Path(shutil.copytree(tiny_model_dir("bert"), tmp_path / "allowed" / "bert"))
    monkeypatch.setenv("ROLLOUT_ALLOWED_MODEL_ROOTS", str(tmp_path / "allowed"))
    outside = str(tiny_model_dir("bert"))
    # CLI (in-process main: same contract as the subprocess)
    with pytest.raises(SystemExit) as stop:
        cli.main(["text", "--model", outside, "--text", "the cat sat"])
    err = capsys.readouterr().err
    assert stop.value.code == 2 and err.count("\n") == 1 and "outside the allowed model folders" in err
    assert cli.main(["text", "--model", str(inside), "--text", "the cat sat", "--json"]) == 0
    capsys.readouterr()
    # page: refused with a message naming the setting; a folder inside the root then works
    at = _text_page(outside)
    assert not at.exception
    assert len(at.error) == 1 and "ROLLOUT_ALLOWED_MODEL_ROOTS" in at.error[0].value
    at.sidebar.text_input(key="model_custom").set_value(str(inside)).run()
    assert not at.exception and not at.error and chart_count(at)


@pytest.mark.filterwarnings("ignore:loading pickle weights")  # the warning the opt-in asks for; the page shows it
def test_pickle_weights_on_the_page_need_the_setting(tiny_model_dir: Callable[[str], Path], tmp_path: Path) -> None:
    folder = Path(shutil.copytree(tiny_model_dir("bert"), tmp_path / "pickled"))
    torch.save(load_file(str(folder / "model.safetensors")), folder / "pytorch_model.bin")
    (folder / "model.safetensors").unlink()
    at = _text_page(str(folder))
    assert not at.exception
    assert len(at.error) == 1 and "pickle" in at.error[0].value and "arbitrary code" in at.error[0].value
    assert not chart_count(at)
    at.sidebar.checkbox(key="model_pickle").check().run()  # the explicit opt-in, with a warning saying why
    assert not at.exception and not at.error, [e.value for e in at.error]
    assert any("arbitrary code" in w.value for w in at.sidebar.warning)
    assert chart_count(at)
