"""Defaults chosen by measurement: the record file, the ranking rule, the fallback, and evaluate --record."""
from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from rollout_core import methods
from rollout_core.models import measured, registry


@pytest.fixture
def records(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setattr(measured, "MEASURED_DIR", tmp_path)
    return tmp_path


def write(folder: Path, model: str, methods: dict[str, dict[str, float | None]]) -> None:
    data = {"model": model, "dataset": "text", "examples": 7, "methods": methods,
            "random": {"pointing_game": 0.2, "deletion_auc": 0.7}}
    (folder / f"{model}.json").write_text(json.dumps(data), encoding="utf-8")


def test_best_pointing_wins_and_ties_are_broken_by_lower_deletion(records: Path) -> None:
    write(records, "m", {
        "rollout": {"pointing_game": 0.05, "deletion_auc": 0.10},  # best deletion, worst pointing
        "gradient": {"pointing_game": 0.88, "deletion_auc": 0.52},
        "attention": {"pointing_game": 0.88, "deletion_auc": 0.51},  # tie on pointing, lower deletion
        "flow": {"pointing_game": None, "deletion_auc": 0.01},  # no ground truth: ranked last
    })
    assert measured.default_method("m", methods.names()) == "attention"
    assert measured.ranking(measured.figures("m")) == ["attention", "gradient", "rollout", "flow"]
    write(records, "n", {"rollout": {"pointing_game": 0.5, "deletion_auc": 0.9},
                         "gradient": {"pointing_game": 0.6, "deletion_auc": 0.95}})
    assert measured.default_method("n", methods.names()) == "gradient"  # pointing first, whatever the deletion


def test_unregistered_methods_in_the_file_are_skipped(records: Path) -> None:
    write(records, "m", {"not-a-method": {"pointing_game": 1.0, "deletion_auc": 0.0},
                         "flow": {"pointing_game": 0.3, "deletion_auc": 0.4}})
    assert measured.default_method("m", methods.names()) == "flow"
    write(records, "only-unknown", {"not-a-method": {"pointing_game": 1.0, "deletion_auc": 0.0}})
    assert measured.default_method("only-unknown", methods.names()) == measured.FALLBACK == "rollout"


def test_models_without_a_usable_file_fall_back_to_rollout(records: Path) -> None:
    assert measured.figures("never-measured") is None
    assert measured.default_method("never-measured", methods.names()) == "rollout"
    assert measured.default_method(None, methods.names()) == "rollout"
    (records / "broken.json").write_text("{not json", encoding="utf-8")
    assert measured.figures("broken") is None and measured.default_method("broken", methods.names()) == "rollout"
    (records / "list.json").write_text("[1, 2]", encoding="utf-8")
    assert measured.default_method("list", methods.names()) == "rollout"


def test_describe_dataset() -> None:
    assert measured.describe_dataset({"dataset": "text", "examples": 100}) == \
        "100 generated sentences with known deciding words"
    assert measured.describe_dataset({"dataset": "image", "examples": 40}, long=False) == "40 generated shapes"
    assert measured.describe_dataset({"dataset": "mine", "examples": 3}) == "3 examples of mine"


def test_evaluate_record_round_trip(records: Path, tiny_model_dir, tmp_path: Path, monkeypatch, capsys) -> None:
    from rollout_core.faithfulness.cli_evaluate import main

    folder = tiny_model_dir("bert")
    entry = registry.RegistryEntry("tiny-bert", "bert", "text-classification", "text", "test model",
                                   embedded=True, locate=lambda: folder)
    monkeypatch.setattr(registry, "EMBEDDED", (*registry.EMBEDDED, entry))
    out = tmp_path / "out"
    argv = ["--model", "tiny-bert", "--dataset", "text", "--limit", "3", "--methods", "rollout", "attention",
            "gradient", "--seeds", "2", "--out", str(out), "--record"]
    assert main(argv) == 0
    data = json.loads((records / "tiny-bert.json").read_text(encoding="utf-8"))
    assert data["examples"] == 3 and data["dataset"] == "text" and data["random_seeds"] == 2
    assert data["command"] == "python -m rollout_core evaluate " + " ".join(argv)
    assert set(data["methods"]) == {"rollout", "attention", "gradient"}
    # the figures are the means of the per-example CSV the same command wrote
    frame = pd.read_csv(out / "text.csv")
    for method in ("rollout", "attention", "gradient", "random"):
        rows = frame[frame["method"] == method]
        stored = data["random"] if method == "random" else data["methods"][method]
        for measure in measured.FIGURES:
            assert stored[measure] == pytest.approx(sum(rows[measure]) / len(rows))
    # the default is the best by a naive loop over the CSV: highest pointing, then lowest deletion
    best, best_key = None, None
    for method in ("rollout", "attention", "gradient"):
        rows = frame[frame["method"] == method]
        key = (-rows["pointing_game"].mean(), rows["deletion_auc"].mean())
        if best_key is None or key < best_key:
            best, best_key = method, key
    assert measured.default_method("tiny-bert", methods.names()) == best
    assert f"its default method is now {best}" in capsys.readouterr().out


def test_record_refuses_models_outside_the_registry(tiny_model_dir, records: Path, capsys) -> None:
    from rollout_core.faithfulness.cli_evaluate import main

    assert main(["--model", str(tiny_model_dir("bert")), "--dataset", "text", "--limit", "1", "--record"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: --record stores figures for registry models only")
    assert not list(records.iterdir())
