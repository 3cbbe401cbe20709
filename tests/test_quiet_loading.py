"""No progress bar of transformers' weight loading ("Loading weights") on stderr from the library's load_model (what
the dashboard's pages and the CLI call), in a fresh process with the user's environment (the CLI's own stderr:
tests/test_cli.py)."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # the whole module: see the fast tier in pyproject.toml

ROOT = Path(__file__).resolve().parents[1]
QUIETING = ("HF_HUB_DISABLE_PROGRESS_BARS", "TRANSFORMERS_VERBOSITY", "TQDM_DISABLE")


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in QUIETING}
    return env | {"PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1", "ROLLOUT_SERVER": "off"}


def test_load_model_prints_no_weight_loading_bar_where_transformers_itself_does(tiny_model_dir, tmp_path):
    folder = str(tiny_model_dir("bert"))
    script = ("import sys, transformers\n"
              f"transformers.AutoModelForSequenceClassification.from_pretrained({folder!r})\n"
              "print('--- rollout_core ---', file=sys.stderr, flush=True)\n"
              "from rollout_core.models.loading import load_model\n"
              f"load_model({folder!r})\n"
              "print('--- transformers again ---', file=sys.stderr, flush=True)\n"
              f"transformers.AutoModelForSequenceClassification.from_pretrained({folder!r})\n")
    proc = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, env=_env(), capture_output=True, text=True,
                          timeout=180)
    assert proc.returncode == 0, proc.stderr
    before, rest = proc.stderr.split("--- rollout_core ---")
    ours, again = rest.split("--- transformers again ---")
    assert "Loading weights" in before  # the bar exists in this environment: the check below can fail
    assert "Loading weights" not in ours, ours
    assert "Loading weights" in again  # only our loads are silenced: the hook is gone afterwards

