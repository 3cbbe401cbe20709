"""Issue 16, model size and weight match: a config declaring too many parameters is refused before the weights
are allocated (ROLLOUT_MAX_MODEL_PARAMS), and weights that do not match the config are refused with the counts
instead of being filled with random values. Counts are checked against the parameters of a real load."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable

import pytest
import torch
from safetensors.torch import load_file, save_file

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
    total = sum(p.numel() for p in loading.load_model(str(tiny_model_dir("bert"))).model.parameters())
    message = str(err.value)
    assert "do not match its config" in message
    assert f"declares {total:,} parameters but its weight files hold 5 (in 2 weights)" in message


def test_a_classifier_loaded_as_an_encoder_is_not_refused(tiny_model_dir: Callable[[str], Path]) -> None:
    handle = loading.load_model(str(tiny_model_dir("bert")), task="text-encoder")  # the head's weights are unused
    assert handle.task == "text-encoder"


def _cli_peak(argv: list[str]) -> tuple[int, str, float]:
    """Run `python -m rollout_core *argv`; its exit status, stderr and peak resident memory (MB)."""
    from cli_driver import ROOT, cli_env

    with tempfile.TemporaryFile() as err:
        proc = subprocess.Popen([sys.executable, "-m", "rollout_core", *argv], stdout=subprocess.DEVNULL, stderr=err,
                                env=cli_env(ROLLOUT_SERVER="off"), cwd=ROOT)
        _, status, usage = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)
        err.seek(0)
        return proc.returncode, err.read().decode(), usage.ru_maxrss / 1024


@pytest.mark.slow
def test_a_config_that_does_not_fit_its_weights_is_refused_before_allocation(
        tiny_model_dir: Callable[[str], Path], tmp_path: Path) -> None:
    """Issue 30: a config declaring a vocabulary of 10^7 (320M parameters, under the size limit) made the load
    allocate 1.2 GB before the weight check refused it; the safetensors headers tell the shapes first."""
    fits, _, baseline = _cli_peak(["text", "a cat", "--model", str(tiny_model_dir("bert"))])
    folder = _copy(tiny_model_dir, tmp_path, vocab_size=10**7)
    status, err, peak = _cli_peak(["text", "a cat", "--model", str(folder)])
    assert fits == 0 and status == 2 and err.count("\n") == 1 and err.startswith("error: "), err
    assert "bert.embeddings.word_embeddings.weight is (93, 32) in the files, (10000000, 32) by the config" in err
    assert peak < baseline + 400, (peak, baseline)  # 10^7 x 32 float32 would be +1220 MB


def test_weight_files_holding_fewer_parameters_than_the_config_are_refused_before_allocation(
        tiny_model_dir: Callable[[str], Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    folder = _copy(tiny_model_dir, tmp_path)
    built = []
    monkeypatch.setattr(torch.nn.Module, "to", lambda self, *a, **k: built.append(self) or self)
    weights = load_file(str(folder / "model.safetensors"))
    renamed = {k.replace("word_embeddings", "other_embeddings"): v for k, v in weights.items()}
    save_file(renamed, str(folder / "model.safetensors"), metadata={"format": "pt"})
    data = json.loads((folder / "config.json").read_text())
    data["vocab_size"] = 200_000  # 6.4M parameters declared, the files hold ~0.1M
    (folder / "config.json").write_text(json.dumps(data))
    with pytest.raises(ModelLoadError, match=r"declares [\d,]+ parameters but its weight files hold [\d,]+"):
        loading.load_model(str(folder))
    assert not built  # refused before any model was built for real


@pytest.mark.parametrize("name, size, what", [
    ("config.json", 9 * 2**20, "settings file"), ("tokenizer_config.json", 9 * 2**20, "settings file"),
    ("tokenizer.json", 65 * 2**20, "tokenizer file"), ("vocab.txt", 65 * 2**20, "tokenizer file"),
])
@pytest.mark.slow
def test_oversized_files_of_a_model_folder_are_not_read(name: str, size: int, what: str,
                                                        tiny_model_dir: Callable[[str], Path], tmp_path: Path) -> None:
    """Issue 30: config.json and tokenizer files had no size cap (a 301 MB config.json peaked at 2.2 GB)."""
    folder = _copy(tiny_model_dir, tmp_path)
    target = folder / name
    original = target.read_bytes() if target.exists() else b"{}"
    with open(target, "wb") as out:  # the real content, extended to the size (a sparse tail: nothing is written)
        out.write(original)
        out.truncate(size)
    status, err, _ = _cli_peak(["text", "a cat", "--model", str(folder)])
    assert status == 2 and err.count("\n") == 1, err
    assert f"{name} in " in err and f"a model's {what} is at most" in err, err
