"""Two threads loading two different models for the first time in a fresh interpreter both succeed.

transformers imports its modules lazily; two threads touching them at once used to fail with
"cannot import name 'CONFIG_MAPPING'" (seen with two browser sessions on a fresh server).
"""
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # the whole module: see the fast tier in pyproject.toml

SCRIPT = r"""
import sys, threading
from rollout_core.models.loading import load_model
folders = sys.argv[1:]
barrier = threading.Barrier(len(folders))
errors = []
def load(folder):
    barrier.wait()
    try:
        load_model(folder)
    except Exception as err:  # report every failure, not just the first
        errors.append(f"{type(err).__name__}: {err}")
threads = [threading.Thread(target=load, args=(f,)) for f in folders]
for t in threads: t.start()
for t in threads: t.join()
print("ERRORS" if errors else "OK", *errors)
"""


def test_concurrent_first_loads_of_different_models(tiny_model_dir):
    folders = [str(tiny_model_dir(kind)) for kind in ("bert", "vit", "gpt2")]
    root = Path(__file__).resolve().parents[1]
    out = subprocess.run([sys.executable, "-c", SCRIPT, *folders], capture_output=True, text=True, cwd=root,
                         env={"HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1", "PATH": "/usr/bin:/bin",
                              "PYTHONPATH": str(root), "HOME": str(Path.home())}, timeout=300)
    assert out.stdout.strip() == "OK", out.stdout + out.stderr
