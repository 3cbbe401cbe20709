"""Flow's compiled kernels are ready before the user's first flow (issue 29): the app starts loading them after its
first page, once per process, and the setup step compiles them into numba's cache. How long a fresh process's first
flow takes is measured by benchmarks/bench_flow_first.py, not here."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from rollout_core import build
from rollout_core.serving import kernels

ROOT = Path(__file__).resolve().parents[1]


def test_the_app_starts_loading_the_kernels_once(monkeypatch):
    calls = []
    monkeypatch.setattr(kernels, "_THREAD", None)
    monkeypatch.setattr(kernels, "_warm_up", lambda: calls.append("warm"))
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=60).run()
    assert not at.exception
    at.run()  # a rerun of the same process starts nothing new
    kernels.start_flow_kernels().join(10)
    assert calls == ["warm"]


def test_the_kernels_are_loaded_after_the_warm_up():
    kernels.start_flow_kernels().join(120)
    assert kernels.flow_kernels_loaded()
    assert kernels.start_flow_kernels() is kernels.start_flow_kernels()


@pytest.mark.slow
def test_a_fresh_process_has_no_kernel_until_the_warm_up_loads_it():
    code = ("from rollout_core.serving import kernels; before = kernels.flow_kernels_loaded(); "
            "kernels.start_flow_kernels().join(120); print(before, kernels.flow_kernels_loaded())")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    assert out.stdout.split() == ["False", "True"]


def test_setup_compiles_the_kernels():
    assert "rollout_core.build.kernels" in build.STEPS
    from rollout_core.build import kernels as step

    assert step.build().startswith("flow kernels: ready")
    assert kernels.flow_kernels_loaded()
