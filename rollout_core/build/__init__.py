"""`python -m rollout_core setup`: build the embedded default models into `models_dir()`, and compile flow's kernels.

Each step is a module in this package with `build(force: bool = False) -> str` that is idempotent
(returns at once when its output is present and current) and returns a one-line status.
"""
from __future__ import annotations

import importlib

STEPS = ("rollout_core.build.text_model", "rollout_core.build.dinov2", "rollout_core.build.image_model",
         "rollout_core.build.kernels")


def build_all(force: bool = False) -> list[str]:
    """Run every build step in order; return their status lines."""
    return [importlib.import_module(step).build(force=force) for step in STEPS]
