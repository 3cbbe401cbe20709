"""Habits that keep the code in shape (issue 24): ruff is clean with the project's configuration, and tests build
explanations by hand only through tests/explanations.py."""
from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_ruff_finds_nothing():
    """`ruff check .` with pyproject.toml's [tool.ruff] (line length 120; pyflakes, pycodestyle, bugbear)."""
    out = subprocess.run([sys.executable, "-m", "ruff", "check", "--no-cache", "."], cwd=ROOT, capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0, out.stdout + out.stderr


def _direct_constructions(path: Path) -> list[int]:
    """Lines of `path` that call `Explanation(...)` themselves."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    return [node.lineno for node in ast.walk(tree) if isinstance(node, ast.Call)
            and getattr(node.func, "id", getattr(node.func, "attr", None)) in ("Explanation", "ExplanationData")]


def test_tests_build_explanations_through_the_one_factory():
    offenders = {str(p.relative_to(ROOT)): lines for p in (ROOT / "tests").rglob("*.py")
                 if p.name != "explanations.py" and (lines := _direct_constructions(p))}
    assert offenders == {}, "use tests/explanations.py make_explanation"
    assert _direct_constructions(ROOT / "tests" / "explanations.py")  # the check can see a construction


def test_every_browser_test_is_marked_browser():
    """tests/browser/ drives Chromium: each module says so, so the fast tier (-m "not slow and not browser") leaves it
    out."""
    unmarked = [p.name for p in (ROOT / "tests" / "browser").glob("test_*.py")
                if "pytestmark = pytest.mark.browser" not in p.read_text(encoding="utf-8")]
    assert unmarked == []
