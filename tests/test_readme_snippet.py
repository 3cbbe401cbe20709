"""The README's Python API snippet runs as written (it once used an undefined `attentions`)."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from rollout_core.models import registry

README = Path(__file__).resolve().parents[1] / "README.md"


def first_python_block(markdown: str) -> str:
    """The body of the first ```python fenced block."""
    match = re.search(r"^```python\n(.*?)^```", markdown, flags=re.S | re.M)
    assert match, "README.md has no ```python block"
    return match.group(1)


def test_readme_python_snippet_runs() -> None:
    for name in ("default-text", "default-image"):
        if not registry.is_available(registry.lookup(name)):
            pytest.skip(f"{name} is not built: {registry.SETUP_HINT}")
    namespace: dict = {}
    exec(compile(first_python_block(README.read_text(encoding="utf-8")), str(README), "exec"), namespace)
    R = namespace["R"].detach()
    assert R.shape[-1] == R.shape[-2] and abs(float(R[0, 0].sum()) - 1.0) < 1e-4  # rollout rows are distributions
