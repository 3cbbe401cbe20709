"""Corpus engine options: `--precision int8` (rows close to float32's on default-text, validated, recorded in the
manifest, the shared handle untouched) and the malloc arena cap set once when worker threads start."""
from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from cli_driver import assert_one_error_line, run_cli_cases
from rollout_core.corpus import folder
from rollout_core.corpus.engine import at_precision, check_precision, explain_in_batches, read_results, run_corpus
from rollout_core.data.sentiment import generate
from rollout_core.errors import InputError
from rollout_core.models.loading import load_model
from rollout_core.serving import malloc
from rollout_core.serving.workers import map_items

QUIET = lambda done, total: None  # noqa: E731


def _corpus(n: int, seed: int = 11) -> pd.DataFrame:
    return pd.DataFrame({"id": [f"r{i}" for i in range(n)], "text": [r.text for r in generate(n, seed=seed)],
                         "label": [None] * n})


@pytest.mark.slow
def test_int8_rows_agree_with_float32_on_generated_sentences():
    """Tolerance from 512 sentences (benchmarks/RESULTS.md): max share difference 0.020, top-1 word 94%,
    prediction 98.6%; bounds here leave room for the smaller sample."""
    handle = load_model("default-text")
    rows = _corpus(96)
    exact = explain_in_batches(handle, rows, "rollout", 32).to_pandas()
    approx = explain_in_batches(at_precision(handle, "int8"), rows, "rollout", 32).to_pandas()
    diffs = [np.max(np.abs(np.asarray(a) - np.asarray(b))) for a, b in zip(exact["scores"], approx["scores"])]
    assert list(exact["words"].map(list)) == list(approx["words"].map(list))
    assert max(diffs) < 0.05 and np.mean(diffs) < 0.01
    assert np.mean([a[0] == b[0] for a, b in zip(exact["top_words"], approx["top_words"])]) >= 0.85
    assert np.mean(exact["prediction"] == approx["prediction"]) >= 0.94
    assert not any("Quantized" in type(m).__name__ for m in handle.model.modules())  # the shared handle: float32


def test_precision_is_validated():
    check_precision("float32", "alti")
    check_precision("int8", "rollout")
    with pytest.raises(InputError, match="float32, int8"):
        check_precision("fp16", "rollout")
    with pytest.raises(InputError, match="rollout"):
        check_precision("int8", "gradient")
    with pytest.raises(InputError, match="rollout"):
        check_precision("int8", "alti")


def test_int8_is_recorded_in_the_manifest_and_not_mixed_with_float32(tiny_handle, tmp_path):
    model = tiny_handle("bert")
    run_corpus(model, _corpus(6), tmp_path / "f32", batch_size=4, progress=QUIET)
    assert "precision" not in json.loads((tmp_path / "f32" / folder.MANIFEST).read_text())
    with pytest.raises(InputError, match="precision"):
        run_corpus(model, _corpus(6), tmp_path / "f32", batch_size=4, precision="int8", progress=QUIET)
    run_corpus(model, _corpus(6), tmp_path / "i8", batch_size=4, precision="int8", progress=QUIET)
    assert json.loads((tmp_path / "i8" / folder.MANIFEST).read_text())["precision"] == "int8"
    assert len(read_results(tmp_path / "i8")) == 6
    assert not any("Quantized" in type(m).__name__ for m in model.model.modules())


@pytest.mark.slow
def test_cli_bad_precision_is_one_error_line(tiny_model_dir, tmp_path):
    source = tmp_path / "in.csv"
    _corpus(3).to_csv(source, index=False)
    base = ["corpus", "--data", str(source), "--model", str(tiny_model_dir("bert"))]
    results = run_cli_cases([([*base, "--out", str(tmp_path / "a"), "--precision", "fp8"], None),
                             ([*base, "--out", str(tmp_path / "b"), "--precision", "int8", "--method", "alti"], None),
                             ([*base, "--out", str(tmp_path / "c"), "--precision", "int8", "--engine", "ray"], None)],
                            tmp_path / "cli")
    assert_one_error_line(results[0], "precision", "fp8")
    assert_one_error_line(results[1], "int8", "alti")
    assert_one_error_line(results[2], "int8", "local engine")


class _FakeLibc:
    def __init__(self, answer: int) -> None:
        self.calls: list[tuple[int, int]] = []
        self.answer = answer

    def mallopt(self, param: int, value: int) -> int:
        self.calls.append((param, value))
        return self.answer


@pytest.fixture
def fake_libc(monkeypatch):
    """A stand-in glibc for `rollout_core.serving.malloc` (answer 1: mallopt succeeded), the arena cap forgotten."""
    def use(answer: int | None) -> _FakeLibc | None:
        libc = None if answer is None else _FakeLibc(answer)
        monkeypatch.setattr(malloc, "_libc", lambda: libc)
        monkeypatch.delenv("MALLOC_ARENA_MAX", raising=False)
        malloc.limit_arenas.cache_clear()
        return libc
    yield use
    malloc.limit_arenas.cache_clear()


def test_worker_threads_cap_the_malloc_arenas_once(fake_libc):
    libc = fake_libc(1)
    with map_items(lambda: abs, [-1], workers=1) as results:
        assert list(results) == [1]
    assert libc.calls == []  # no worker threads: nothing to cap
    for _ in range(2):
        with map_items(lambda: abs, [-1, -2], workers=2) as results:
            assert list(results) == [1, 2]
    assert libc.calls == [(-8, 1)]  # M_ARENA_MAX, once per process


def test_arena_cap_is_skipped_off_glibc_and_tolerates_failure(fake_libc, monkeypatch):
    fake_libc(None)
    assert malloc.limit_arenas() is False
    libc = fake_libc(0)  # mallopt refused
    with map_items(lambda: abs, [-3], workers=2) as results:
        assert list(results) == [3]
    assert libc.calls == [(-8, 1)] and malloc.limit_arenas() is False
    libc = fake_libc(1)
    monkeypatch.setenv("MALLOC_ARENA_MAX", "4")  # the user's own setting stands
    assert malloc.limit_arenas() is False and libc.calls == []
