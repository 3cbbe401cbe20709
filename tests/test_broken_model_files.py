"""Issue 16: model folders a user can fix (lying or truncated safetensors, deeply nested configs, wrong types,
a tokenizer named as architecture, failing pickle, absurd names) end in a ModelLoadError, never another error."""
from __future__ import annotations

import json
import shutil
import warnings
from pathlib import Path
from typing import Callable

import pytest

from rollout_core.errors import RolloutError
from rollout_core.models import loading


def _copy(tiny_model_dir: Callable[[str], Path], tmp_path: Path) -> Path:
    loading.clear_cache()
    return Path(shutil.copytree(tiny_model_dir("bert"), tmp_path / "m"))


def _config(folder: Path, **changes: object) -> None:
    data = json.loads((folder / "config.json").read_text())
    data.update(changes)
    (folder / "config.json").write_text(json.dumps(data))


def truncated_safetensors(folder: Path) -> None:
    weights = folder / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:200])


def lying_safetensors(folder: Path) -> None:
    weights = folder / "model.safetensors"
    data = weights.read_bytes()
    weights.write_bytes((10**9).to_bytes(8, "little") + data[8:])  # header length beyond the file


def deep_config(folder: Path) -> None:
    text = (folder / "config.json").read_text()
    (folder / "config.json").write_text(text[:-1] + ', "deep": ' + "[" * 100_000 + "]" * 100_000 + "}")


def deep_tokenizer(folder: Path) -> None:
    (folder / "tokenizer_config.json").write_text('{"x": ' + "[" * 100_000 + "]" * 100_000 + "}")


def wrong_type(folder: Path) -> None:
    _config(folder, num_hidden_layers="six")


def tokenizer_architecture(folder: Path) -> None:
    _config(folder, architectures=["AutoTokenizer"])


def bad_pickle(folder: Path) -> None:
    (folder / "model.safetensors").unlink()
    (folder / "pytorch_model.bin").write_bytes(b"\x80\x04not a pickle at all")


@pytest.mark.parametrize("breaks", [truncated_safetensors, lying_safetensors, deep_config, deep_tokenizer,
                                    wrong_type, tokenizer_architecture, bad_pickle])
def test_broken_folder_is_a_clear_error(breaks: Callable[[Path], None], tiny_model_dir: Callable[[str], Path],
                                        tmp_path: Path) -> None:
    folder = _copy(tiny_model_dir, tmp_path)
    breaks(folder)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            loading.load_model(str(folder), allow_pickle=True)
        except RolloutError as err:
            assert str(folder) in str(err) or "config" in str(err)
        else:  # the architecture names a tokenizer: the task's Auto class is used instead, and that works
            assert breaks is tokenizer_architecture


@pytest.mark.parametrize("name", ["a" * 300, "~nosuchuser/x"])
def test_absurd_names_are_a_clear_error(name: str) -> None:
    with pytest.raises(RolloutError):
        loading.load_model(name)
