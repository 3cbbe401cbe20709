"""`python -m rollout_core`: real subprocesses for the happy paths and the error contract
(exit 2, exactly one `error: ...` line on stderr, no traceback); in-process `main()` for the rest."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from rollout_core import cli

ROOT = Path(__file__).resolve().parents[1]


def _run(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess:
    """The CLI in a fresh process, in an environment without the variables that quiet progress bars (the CLI's own
    stderr must be clean without them)."""
    quieting = ("HF_HUB_DISABLE_PROGRESS_BARS", "TRANSFORMERS_VERBOSITY", "TQDM_DISABLE")
    env = {k: v for k, v in os.environ.items() if k not in quieting}
    env |= {"HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-m", "rollout_core", *args], input=stdin, capture_output=True,
                          text=True, env=env, cwd=ROOT, timeout=120)


def _one_error_line(proc: subprocess.CompletedProcess, status: int = 2) -> str:
    assert proc.returncode == status, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), proc.stderr
    assert "Traceback" not in proc.stderr
    return lines[0]


@pytest.mark.slow
def test_text_json_from_stdin(tiny_model_dir):
    proc = _run("text", "--model", str(tiny_model_dir("bert")), "--text", "-", "--json", "--method", "gradient",
                "--target", "POSITIVE", stdin="the cat sat on the mat")
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == ""  # no "Loading weights" bars, no warnings
    data = json.loads(proc.stdout)
    assert data["tokens"][0] == "[CLS]" and data["text"] == "the cat sat on the mat"
    assert len(data["scores"]) == len(data["tokens"]) and len(data["layer_scores"]) == 2
    assert data["target"] == "POSITIVE" and data["settings"]["method"] == "gradient"
    assert {p["label"] for p in data["prediction"]} == {"NEGATIVE", "NEUTRAL", "POSITIVE"}


@pytest.mark.slow
def test_image_json(tiny_model_dir, tmp_path):
    path = tmp_path / "x.png"
    Image.fromarray((np.random.default_rng(0).random((40, 60, 3)) * 255).astype(np.uint8)).save(path)
    proc = _run("image", "--model", str(tiny_model_dir("deit")), "--image", str(path), "--json")
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == ""
    data = json.loads(proc.stdout)
    assert data["grid"] == [4, 4] and data["tokens"][:2] == ["[CLS]", "[DIST]"]
    assert np.isclose(np.sum(data["score_map"]), 1.0)


@pytest.mark.slow
def test_bad_model_is_one_line(tmp_path):
    line = _one_error_line(_run("text", "--model", str(tmp_path / "missing"), "--text", "hi"))
    assert "no such model folder" in line


def test_bad_command_line_is_one_line():
    line = _one_error_line(_run("text", "--text", "hi", "--method", "bogus"))
    assert "invalid choice" in line


# in-process: same contract, no interpreter start-up


def _main(capsys, *args: str) -> tuple[int, str, str]:
    try:
        status = cli.main(list(args))
    except SystemExit as stop:
        status = stop.code
    out, err = capsys.readouterr()
    return status, out, err


@pytest.mark.parametrize("args, words", [
    (["--text", "   "], "empty"),
    (["--text", "hi", "--discard-ratio", "1.5"], "discard_ratio"),
    (["--text", "hi", "--target", "CHEERFUL"], "unknown target"),
    (["--text", "hi", "--labels", "a,b"], "sentence encoder"),
    (["--text", "hi", "--start-layer", "7"], "out of range"),
    ([], "no text given"),
    (["hi", "--text", "hi"], "given twice"),
])
def test_user_errors_exit_2_with_one_line(capsys, tiny_model_dir, args, words):
    status, out, err = _main(capsys, "text", "--model", str(tiny_model_dir("bert")), *args)
    assert status == 2 and out == ""
    assert err.count("\n") == 1 and err.startswith("error: ") and words in err


def test_plain_text_table(capsys, tiny_model_dir):
    status, out, _ = _main(capsys, "text", "--model", str(tiny_model_dir("bert")), "--text", "the cat sat")
    assert status == 0
    assert "prediction:" in out and "[CLS]" not in out
    rows = [line for line in out.splitlines() if line.startswith("'")]
    assert [r.split()[0] for r in rows] == ["'the'", "'cat'", "'sat'"]
    assert abs(sum(float(r.split()[-1]) for r in rows) - 1) < 1e-3


def test_text_and_image_can_be_given_as_arguments(capsys, tiny_model_dir, tmp_path):
    model = str(tiny_model_dir("bert"))
    assert _main(capsys, "text", "the cat sat", "--model", model, "--json")[1] == \
        _main(capsys, "text", "--text", "the cat sat", "--model", model, "--json")[1]
    path = tmp_path / "x.png"
    Image.fromarray((np.random.default_rng(0).random((40, 60, 3)) * 255).astype(np.uint8)).save(path)
    status, out, _ = _main(capsys, "image", str(path), "--model", str(tiny_model_dir("vit")), "--json")
    assert status == 0 and json.loads(out)["grid"]
    status, _, err = _main(capsys, "image", "--model", str(tiny_model_dir("vit")))
    assert status == 2 and err.count("\n") == 1 and "no image given" in err


def test_zero_shot_labels(capsys, tiny_model_dir):
    status, out, _ = _main(capsys, "text", "--model", str(tiny_model_dir("sentence")), "--text", "the cat",
                           "--labels", "good, bad", "--json")
    assert status == 0
    assert {p["label"] for p in json.loads(out)["prediction"]} == {"good", "bad"}


def test_internal_errors_exit_1(capsys, monkeypatch, tiny_model_dir):
    def broken(*args, **kwargs):
        raise ZeroDivisionError("boom")

    monkeypatch.setattr("rollout_core.explain.explain_text", broken)
    status, _, err = _main(capsys, "text", "--model", str(tiny_model_dir("bert")), "--text", "hi")
    assert status == 1 and err == "error: internal: ZeroDivisionError: boom\n"


def test_pickle_needs_the_flag(capsys, tiny_model_dir, tmp_path):
    import shutil

    import torch
    from safetensors.torch import load_file

    folder = Path(shutil.copytree(tiny_model_dir("bert"), tmp_path / "pickled"))
    torch.save(load_file(str(folder / "model.safetensors")), folder / "pytorch_model.bin")
    (folder / "model.safetensors").unlink()
    status, _, err = _main(capsys, "text", "--model", str(folder), "--text", "hi")
    assert status == 2 and "pickle" in err
    status, out, err = _main(capsys, "text", "--model", str(folder), "--text", "hi", "--allow-pickle", "--json")
    assert status == 0 and json.loads(out)["tokens"][0] == "[CLS]"
    assert err.startswith("warning: ") and "pickle" in err


def test_models_lists_the_registry(capsys):
    status, out, _ = _main(capsys, "models", "--json")
    names = [row["name"] for row in json.loads(out)]
    assert status == 0 and names[:4] == ["default-text", "default-image", "dinov2-small", "minilm"]


def test_flow_output_says_exact_or_approximate_and_which_rows(capsys, tiny_model_dir, tmp_path):
    model = str(tiny_model_dir("bert"))
    status, out, _ = _main(capsys, "text", "the cat sat", "--model", model, "--method", "flow")
    assert status == 0
    assert "attention flow: exact; explained row only (the full matrix, not computed unless asked for, is" in out
    status, out, _ = _main(capsys, "text", "the cat sat", "--model", model, "--method", "flow", "--full-matrix",
                           "--json")
    data = json.loads(out)
    assert status == 0 and data["settings"]["flow_rows"] == "all rows (full matrix)"
    path = tmp_path / "x.png"
    Image.fromarray((np.random.default_rng(1).random((40, 60, 3)) * 255).astype(np.uint8)).save(path)
    status, out, _ = _main(capsys, "image", str(path), "--model", str(tiny_model_dir("vit")), "--method", "flow")
    assert status == 0
    assert "attention flow: exact here (each row pruned to 80% of its mass; the error bound is 0)" in out
