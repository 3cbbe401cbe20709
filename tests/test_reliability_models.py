"""Issue 7: hostile or broken model folders end in a clear `RolloutError` in the core, exit status 2 with one
`error: ...` line in the CLI, and an `st.error` on the page (which then works with a good model).

Each folder is an ordinary saved model with one thing wrong, written here from a tiny model:
- NaN weights: layer 1's query projection is NaN, so its attention weights are NaN;
- a model that raises in its forward pass: the embedding table was cut to 8 rows but the tokenizer still
  produces larger ids (a repository whose tokenizer and model disagree);
- no attention layers at all: a tiny ResNet;
- custom code: the config's auto_map points at Python files (trust_remote_code would be needed).
"""
from __future__ import annotations

import json
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import pytest
import streamlit as st
import torch
from PIL import Image
from safetensors.torch import load_file, save_file
from streamlit.testing.v1 import AppTest

from cli_driver import ROOT, assert_one_error_line, cli_env, run_cli_cases
from page_views import chart_count
from rollout_core.errors import RolloutError, SecurityError, UnsupportedModelError
from rollout_core.explain import explain_image, explain_text
from rollout_core.models.loading import load_model

APP = str(ROOT / "app.py")
TEXT = "cat sat on mat"  # every id of the tiny vocabulary here is >= 8


def _edit_weights(folder: Path, edit: Callable[[dict[str, torch.Tensor]], None]) -> None:
    weights = load_file(str(folder / "model.safetensors"))
    edit(weights)
    save_file(weights, str(folder / "model.safetensors"), metadata={"format": "pt"})


def _edit_config(folder: Path, **changes: object) -> None:
    config = json.loads((folder / "config.json").read_text())
    config.update(changes)
    (folder / "config.json").write_text(json.dumps(config))


def nan_weights(tiny_model_dir: Callable[[str], Path], out: Path) -> Path:
    folder = Path(shutil.copytree(tiny_model_dir("bert"), out))
    _edit_weights(folder, lambda w: w["bert.encoder.layer.1.attention.self.query.weight"].fill_(float("nan")))
    return folder


def raises_in_forward(tiny_model_dir: Callable[[str], Path], out: Path) -> Path:
    folder = Path(shutil.copytree(tiny_model_dir("bert"), out))

    def cut(w: dict[str, torch.Tensor]) -> None:
        w["bert.embeddings.word_embeddings.weight"] = w["bert.embeddings.word_embeddings.weight"][:8].clone()

    _edit_weights(folder, cut)
    _edit_config(folder, vocab_size=8)
    return folder


def no_attention(tiny_model_dir: Callable[[str], Path], out: Path) -> Path:
    import transformers as tf

    from tiny_models import image_processor

    torch.manual_seed(0)
    config = tf.ResNetConfig(embedding_size=8, hidden_sizes=[8, 16], depths=[1, 1], layer_type="basic",
                             id2label={0: "a", 1: "b"}, label2id={"a": 0, "b": 1})
    tf.ResNetForImageClassification(config).save_pretrained(out)
    image_processor().save_pretrained(out)
    return Path(out)


def remote_code(tiny_model_dir: Callable[[str], Path], out: Path) -> Path:
    folder = Path(shutil.copytree(tiny_model_dir("bert"), out))
    (folder / "modeling_evil.py").write_text("import os\nos.system('touch /tmp/pwned-by-a-model')\n")
    _edit_config(folder, auto_map={"AutoModelForSequenceClassification": "modeling_evil.EvilModel"})
    return folder


@dataclass(frozen=True)
class Hostile:
    id: str
    build: Callable[[Callable[[str], Path], Path], Path]
    modality: str
    error: type[RolloutError]
    message: str


HOSTILE = [
    Hostile("nan-weights", nan_weights, "text", UnsupportedModelError, "NaN or infinite self-attention weights"),
    Hostile("raises-in-forward", raises_in_forward, "text", UnsupportedModelError, "the model failed on this input"),
    Hostile("no-attention-layers", no_attention, "image", UnsupportedModelError, "no self-attention layers"),
    Hostile("needs-remote-code", remote_code, "text", SecurityError, "needs custom code"),
]


@pytest.fixture(scope="module")
def hostile_dir(tiny_model_dir: Callable[[str], Path], tmp_path_factory: pytest.TempPathFactory
                ) -> Callable[[Hostile], Path]:
    built: dict[str, Path] = {}

    def get(case: Hostile) -> Path:
        if case.id not in built:
            built[case.id] = case.build(tiny_model_dir, tmp_path_factory.mktemp("hostile") / case.id)
        return built[case.id]

    return get


def _picture_file(folder: Path) -> Path:
    path = folder / "picture.png"
    Image.new("RGB", (40, 30), (200, 30, 30)).save(path)
    return path


@pytest.mark.parametrize("case", HOSTILE, ids=[c.id for c in HOSTILE])
def test_hostile_model_core(case: Hostile, hostile_dir: Callable[[Hostile], Path], tmp_path: Path) -> None:
    folder = hostile_dir(case)
    with pytest.raises(case.error, match=case.message):
        if case.modality == "text":
            explain_text(load_model(folder), TEXT)
        else:
            explain_image(load_model(folder), _picture_file(tmp_path))
    assert not Path("/tmp/pwned-by-a-model").exists()


@pytest.mark.slow
def test_hostile_models_through_the_cli(hostile_dir: Callable[[Hostile], Path], tiny_model_dir: Callable[[str], Path],
                                        tmp_path: Path) -> None:
    picture = _picture_file(tmp_path)
    argv = [[c.modality, "--model", str(hostile_dir(c)), *(["--text", TEXT] if c.modality == "text"
                                                          else ["--image", str(picture)])] for c in HOSTILE]
    # one plain `python -m rollout_core` process beside the forked ones: both must print the same line
    plain = subprocess.Popen([sys.executable, "-m", "rollout_core", *argv[-1]], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True, env=cli_env(), cwd=ROOT)
    results = run_cli_cases([(a, None) for a in argv], tmp_path / "cli",
                            warm=[tiny_model_dir("bert"), tiny_model_dir("vit")])
    for case, result in zip(HOSTILE, results):
        assert_one_error_line(result, case.message)
    out, err = plain.communicate(timeout=240)
    assert plain.returncode == 2 and out == "" and err == results[-1].stderr
    assert not Path("/tmp/pwned-by-a-model").exists()


@pytest.mark.parametrize("case", HOSTILE, ids=[c.id for c in HOSTILE])
def test_hostile_model_on_the_page(case: Hostile, hostile_dir: Callable[[Hostile], Path],
                                   tiny_model_dir: Callable[[str], Path]) -> None:
    st.cache_resource.clear()
    at = AppTest.from_file(APP, default_timeout=120)
    at.query_params["model"] = str(hostile_dir(case))
    if case.modality == "text":
        at.query_params["text"] = TEXT
    at = at.switch_page(f"app_pages/{case.modality}.py").run()
    assert not at.exception, [e.value for e in at.exception]
    assert len(at.error) == 1 and case.message in at.error[0].value, [e.value for e in at.error]
    good = tiny_model_dir("bert" if case.modality == "text" else "vit")
    at.sidebar.text_input(key="model_custom").set_value(str(good)).run()  # the page is still usable
    assert not at.exception and not at.error, [e.value for e in at.error]
    assert chart_count(at) >= 2
