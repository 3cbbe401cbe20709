"""Issue 16, item 7: model folders and names a user can fix (lying or truncated safetensors, configs and tokenizers
nested 100k deep, a config value of the wrong type, failing pickle with the opt-in given, absurd names) end in a
`RolloutError` in the core, exit status 2 with one `error: ...` line in the CLI, and one clear `st.error` on the text
page: never an internal error, a traceback or "Unexpected error". A tokenizer named as the architecture is not an
error at all: the model class comes from the task.

Each folder is a copy of the tiny BERT classifier (tests/tiny_models.py) with one thing wrong, written here."""
from __future__ import annotations

import json
import re
import shutil
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import pytest

from app_pages._lib.safe import ZERO_WIDTH
from cli_driver import CliResult, assert_one_error_line, run_cli_cases
from page_views import page
from rollout_core.errors import RolloutError
from rollout_core.explain import explain_text
from rollout_core.models import loading

TEXT = "the cat sat on the mat"
DEEP = 100_000


def _config(folder: Path, **changes: object) -> None:
    data = json.loads((folder / "config.json").read_text())
    data.update(changes)
    (folder / "config.json").write_text(json.dumps(data))


def _nest(path: Path) -> None:
    """Add a list nested DEEP levels to the JSON object in `path` (checked: Python's json cannot read it back)."""
    text = path.read_text().rstrip()
    assert text.endswith("}")
    path.write_text(text[:-1] + ', "deep": ' + "[" * DEEP + "]" * DEEP + "}")
    with pytest.raises(RecursionError):
        json.loads(path.read_text())


def _edit_header(folder: Path, edit: Callable[[dict], None]) -> None:
    """Rewrite model.safetensors with its JSON header changed by `edit` (tensor data untouched)."""
    weights = folder / "model.safetensors"
    data = weights.read_bytes()
    length = int.from_bytes(data[:8], "little")
    header = json.loads(data[8:8 + length])
    edit(header)
    raw = json.dumps(header).encode()
    raw += b" " * (-len(raw) % 8)
    weights.write_bytes(len(raw).to_bytes(8, "little") + raw + data[8 + length:])


def _tensors(header: dict) -> list[dict]:
    return [v for k, v in header.items() if k != "__metadata__"]


def truncated_safetensors(folder: Path) -> None:
    weights = folder / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:200])


def header_length_lies(folder: Path) -> None:
    weights = folder / "model.safetensors"
    data = weights.read_bytes()
    weights.write_bytes((10**9).to_bytes(8, "little") + data[8:])  # header length beyond the file


def offsets_lie(folder: Path) -> None:
    def edit(header: dict) -> None:
        _tensors(header)[0]["data_offsets"] = [0, 10**9]  # a tensor ending far beyond the file
    _edit_header(folder, edit)


def dtype_lies(folder: Path) -> None:
    def edit(header: dict) -> None:
        for tensor in _tensors(header):
            tensor["dtype"] = "F64"  # twice the bytes the offsets give
    _edit_header(folder, edit)


def shape_lies(folder: Path) -> None:
    def edit(header: dict) -> None:
        for tensor in _tensors(header):
            tensor["shape"] = tensor["shape"][::-1]  # the same bytes, matrices transposed
    _edit_header(folder, edit)


def deep_config(folder: Path) -> None:
    _nest(folder / "config.json")


def deep_tokenizer_config(folder: Path) -> None:
    _nest(folder / "tokenizer_config.json")


def deep_tokenizer_json(folder: Path) -> None:
    _nest(folder / "tokenizer.json")


def wrong_type(folder: Path) -> None:
    _config(folder, num_hidden_layers="six")


def bad_pickle(folder: Path) -> None:
    (folder / "model.safetensors").unlink()
    (folder / "pytorch_model.bin").write_bytes(b"\x80\x04not a pickle at all")


class _RunsCode:
    """Pickled as a call of os.system (harmless here: `true`), as a hostile checkpoint would be."""

    def __reduce__(self) -> tuple:
        import os

        return os.system, ("true",)


def code_running_pickle(folder: Path) -> None:
    import torch

    (folder / "model.safetensors").unlink()
    torch.save({"bert.embeddings.word_embeddings.weight": _RunsCode()}, folder / "pytorch_model.bin")


def tokenizer_architecture(folder: Path) -> None:
    _config(folder, architectures=["AutoTokenizer"])


@dataclass(frozen=True)
class Broken:
    """One thing a user can fix: a change to a copy of the tiny model folder, or a model name of its own;
    `says`: what the one-line message must contain (lower case)."""

    id: str
    breaks: Callable[[Path], None] | str
    says: str
    allow_pickle: bool = False


LONG_NAME = "a" * 300
BROKEN = [
    Broken("truncated-safetensors", truncated_safetensors, "safetensor"),
    Broken("safetensors-header-length-lies", header_length_lies, "safetensor"),
    Broken("safetensors-offsets-lie", offsets_lie, "safetensor"),
    Broken("safetensors-dtype-lies", dtype_lies, "safetensor"),
    Broken("safetensors-shape-lies", shape_lies, "shape"),
    Broken("config-nested-deep", deep_config, "config.json"),
    Broken("tokenizer-config-nested-deep", deep_tokenizer_config, "tokenizer"),
    Broken("tokenizer-json-nested-deep", deep_tokenizer_json, "tokenizer"),
    Broken("num-hidden-layers-six", wrong_type, "num_hidden_layers"),
    Broken("bad-pickle-opted-in", bad_pickle, "pickl", allow_pickle=True),
    Broken("code-running-pickle-opted-in", code_running_pickle, "global posix.system", allow_pickle=True),
    Broken("300-character-name", LONG_NAME, str(len(LONG_NAME))),
    Broken("name-part-too-long-in-bytes", "/tmp/" + "é" * 200, "é" * 200),  # 200 characters, 400 bytes
    Broken("no-such-user-home", "~nosuchuser/x", "~nosuchuser/x"),
]
FROM_A_LINK = [Broken("nul-character-in-name", "./a\0b", "a\\x00b")]
"""Names only a link can give (a command line cannot hold a NUL character)."""
TOKENIZER_ARCHITECTURE = Broken("architectures-autotokenizer", tokenizer_architecture, "")


@pytest.fixture(scope="module")
def broken_model(tiny_model_dir: Callable[[str], Path], tmp_path_factory: pytest.TempPathFactory
                 ) -> Callable[[Broken], str]:
    """`broken_model(case)`: the model name to give for `case` (a folder built once per module, or the name)."""
    built: dict[str, str] = {}

    def get(case: Broken) -> str:
        if isinstance(case.breaks, str):
            return case.breaks
        if case.id not in built:
            # a name that says nothing of the case: the message, not the path in it, must tell what is wrong
            folder = Path(shutil.copytree(tiny_model_dir("bert"), tmp_path_factory.mktemp("m") / "model"))
            case.breaks(folder)
            built[case.id] = str(folder)
        return built[case.id]

    return get


def _argv(case: Broken, model: str) -> list[str]:
    return ["text", "--model", model, "--text", TEXT, *(["--allow-pickle"] if case.allow_pickle else [])]


@pytest.fixture(scope="module")
def cli_results(broken_model: Callable[[Broken], str], tiny_model_dir: Callable[[str], Path],
                tmp_path_factory: pytest.TempPathFactory) -> dict[str, CliResult]:
    """Every case of BROKEN and TOKENIZER_ARCHITECTURE as `python -m rollout_core text --model ...` (one driver)."""
    cases = [*BROKEN, TOKENIZER_ARCHITECTURE]
    results = run_cli_cases([(_argv(c, broken_model(c)), None) for c in cases], tmp_path_factory.mktemp("cli"),
                            warm=[tiny_model_dir("bert")])
    return {c.id: r for c, r in zip(cases, results)}


def _shown(value: str) -> str:
    """An error box's text as read: Markdown escapes and zero-width breaks removed."""
    return re.sub(r"\\(.)", r"\1", value.replace(ZERO_WIDTH, ""))


@pytest.mark.parametrize("case", BROKEN + FROM_A_LINK, ids=[c.id for c in BROKEN + FROM_A_LINK])
def test_broken_model_is_a_clear_error_in_the_core(case: Broken, broken_model: Callable[[Broken], str]) -> None:
    loading.clear_cache()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(RolloutError) as caught:
            loading.load_model(broken_model(case), allow_pickle=case.allow_pickle)
    assert case.says in str(caught.value).lower(), str(caught.value)
    assert "re-running" not in str(caught.value).lower()  # never torch's advice to load with weights_only=False


@pytest.mark.slow
@pytest.mark.parametrize("case", BROKEN, ids=[c.id for c in BROKEN])
def test_broken_model_is_one_error_line_in_the_cli(case: Broken, cli_results: dict[str, CliResult]) -> None:
    line = assert_one_error_line(cli_results[case.id], case.says)
    assert "internal" not in line


@pytest.mark.parametrize("case", BROKEN + FROM_A_LINK, ids=[c.id for c in BROKEN + FROM_A_LINK])
def test_broken_model_is_a_clear_error_on_the_page(case: Broken, broken_model: Callable[[Broken], str]) -> None:
    loading.clear_cache()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        at = page("app_pages/text.py", model=broken_model(case), text=TEXT)
        if case.allow_pickle:  # the opt-in is never read from a link: ticked as a visitor would
            at.sidebar.checkbox(key="model_pickle").check().run()
    assert not at.exception, [e.value for e in at.exception]
    errors = [_shown(e.value) for e in at.error]
    assert len(errors) == 1, errors
    assert case.says in errors[0].lower() and "unexpected error" not in errors[0].lower(), errors
    assert "Traceback" not in errors[0] and not any("bug report" in e.label for e in at.expander)


@pytest.mark.slow
def test_a_tokenizer_named_as_architecture_is_not_an_error(broken_model: Callable[[Broken], str],
                                                           cli_results: dict[str, CliResult]) -> None:
    """transformers.AutoTokenizer is not a model class: the task's Auto class loads the weights instead."""
    folder = broken_model(TOKENIZER_ARCHITECTURE)
    loading.clear_cache()
    assert explain_text(loading.load_model(folder), TEXT).display_tokens() == TEXT.split()
    result = cli_results[TOKENIZER_ARCHITECTURE.id]
    assert result.status == 0 and result.stderr == "", result.stderr
    assert all(word in result.stdout for word in TEXT.split()), result.stdout
    at = page("app_pages/text.py", model=folder, text=TEXT)
    assert not at.exception and not at.error, [e.value for e in [*at.exception, *at.error]]
