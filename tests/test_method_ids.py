"""A method owns its facts: outside rollout_core/methods/, code names a method id (other than the generic
"rollout" and "attention") in at most a handful of places (a default choice), so a new method is its own module."""
from __future__ import annotations

import ast
from pathlib import Path

from rollout_core import methods

ROOT = Path(__file__).resolve().parents[1]
GENERIC = {"rollout", "attention"}
LIMIT = 6


def _docstrings(tree: ast.AST) -> set[int]:
    found = set()
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if isinstance(body, list) and body and isinstance(body[0], ast.Expr) and isinstance(body[0].value,
                                                                                              ast.Constant):
            found.add(id(body[0].value))
    return found


def method_id_literals(base: Path, roots: tuple[str, ...], ids: set[str]) -> list[str]:
    """'file:line id' of every string literal (docstrings aside) equal to one of `ids` in .py files under the
    folders `roots` of `base`, rollout_core/methods/ left out."""
    hits = []
    for root in roots:
        for path in sorted((base / root).rglob("*.py")):
            if (base / "rollout_core" / "methods") in path.parents:
                continue
            tree = ast.parse(path.read_text(encoding="utf-8"))
            skip = _docstrings(tree)
            hits += [f"{path.relative_to(base)}:{node.lineno} {node.value}" for node in ast.walk(tree)
                     if isinstance(node, ast.Constant) and node.value in ids and id(node) not in skip]
    return hits


def test_few_method_ids_outside_the_methods_package():
    hits = method_id_literals(ROOT, ("rollout_core", "app_pages"), set(methods.names()) - GENERIC)
    assert len(hits) <= LIMIT, "\n".join(hits)


def test_the_scan_finds_a_planted_literal_and_skips_docstrings_and_the_methods_package(tmp_path):
    for folder in ("app_pages", "rollout_core/methods"):
        (tmp_path / folder).mkdir(parents=True)
        (tmp_path / folder / "page.py").write_text('"""flow in a docstring is fine."""\nCHOICE = "flow"\n')
    assert method_id_literals(tmp_path, ("app_pages", "rollout_core"), {"flow"}) == ["app_pages/page.py:2 flow"]
