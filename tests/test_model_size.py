"""Issue 16, model size and weight match: a config declaring too many parameters is refused before the weights
are allocated (ROLLOUT_MAX_MODEL_PARAMS), and weights that do not match the config are refused with the counts
instead of being filled with random values. Counts are checked against the parameters of a real load."""
from __future__ import annotations

import json
import shutil
import time
from pathlib import Path
from typing import Callable

import pytest
import torch
from safetensors.torch import save_file

from rollout_core.errors import ModelLoadError, SecurityError
from rollout_core.models import loading
from rollout_core.settings import SettingsError


@pytest.fixture(autouse=True)
def _cold() -> None:
    loading.clear_cache()


def _copy(tiny_model_dir: Callable[[str], Path], tmp_path: Path, **config: object) -> Path:
    folder = Path(shutil.copytree(tiny_model_dir("bert"), tmp_path / "m"))
    data = json.loads((folder / "config.json").read_text())
    data.update(config)
    (folder / "config.json").write_text(json.dumps(data))
    return folder


@pytest.mark.parametrize("config", [
    {"num_hidden_layers": 100_000},
    {"num_hidden_layers": 300, "hidden_size": 768, "num_attention_heads": 12, "intermediate_size": 3072},
    {"num_hidden_layers": 64, "hidden_size": 4096, "intermediate_size": 16384},
])
def test_a_huge_declared_model_is_refused_before_allocation(config: dict, tiny_model_dir: Callable[[str], Path],
                                                            tmp_path: Path) -> None:
    folder = _copy(tiny_model_dir, tmp_path, **config)
    start = time.perf_counter()
    with pytest.raises(SecurityError, match="limit"):
        loading.load_model(str(folder))
    assert time.perf_counter() - start < 10


def test_the_limit_is_the_exact_parameter_count(tiny_model_dir: Callable[[str], Path], tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    handle = loading.load_model(str(tiny_model_dir("bert")))
    count = sum(p.numel() for p in handle.model.parameters())  # the real model's parameters
    loading.clear_cache()
    monkeypatch.setenv("ROLLOUT_MAX_MODEL_PARAMS", str(count - 1))
    with pytest.raises(SecurityError, match=f"{count:,} parameters"):
        loading.load_model(str(tiny_model_dir("bert")))
    monkeypatch.setenv("ROLLOUT_MAX_MODEL_PARAMS", f"{count:.6e}" if float(f"{count:.6e}") == count else str(count))
    assert loading.load_model(str(tiny_model_dir("bert"))).model is not None


@pytest.mark.parametrize("raw", ["nan", "-1", "lots", "1.5"])
def test_a_bad_size_setting_is_a_clear_error(raw: str, tiny_model_dir: Callable[[str], Path],
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ROLLOUT_MAX_MODEL_PARAMS", raw)
    with pytest.raises(SettingsError, match=f"ROLLOUT_MAX_MODEL_PARAMS={raw!r}"):
        loading.load_model(str(tiny_model_dir("bert")))


def test_unrelated_weights_are_refused_with_the_counts(tiny_model_dir: Callable[[str], Path], tmp_path: Path) -> None:
    folder = _copy(tiny_model_dir, tmp_path)
    save_file({"unrelated.a": torch.zeros(3), "unrelated.b": torch.ones(2)}, str(folder / "model.safetensors"),
              metadata={"format": "pt"})
    with pytest.raises(ModelLoadError) as err:
        loading.load_model(str(folder))
    total = len(loading.load_model(str(tiny_model_dir("bert"))).model.state_dict())
    message = str(err.value)
    assert "do not match its config" in message and "2 weights in the files" in message
    missing = int(message.split(" of ")[0])
    assert 0 < missing <= total and f"of {total} weights missing" in message


def test_a_classifier_loaded_as_an_encoder_is_not_refused(tiny_model_dir: Callable[[str], Path]) -> None:
    handle = loading.load_model(str(tiny_model_dir("bert")), task="text-encoder")  # the head's weights are unused
    assert handle.task == "text-encoder"
