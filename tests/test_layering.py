"""Issue 24: the layers of rollout_core hold by construction. Every import (lazy and TYPE_CHECKING ones included)
goes to the importer's own layer or a lower one (tests/layering.py LAYERS, shown in docs/ARCHITECTURE.md), with the
one named exception, and no import cycle; the checker is shown to catch a planted upward import."""
from __future__ import annotations

import re
import shutil
from pathlib import Path

from layering import EXCEPTIONS, Import, cycles, imports, render, unplaced, upward

ROOT = Path(__file__).resolve().parents[1]
CORE = ROOT / "rollout_core"


def test_every_module_has_a_layer_and_no_import_goes_up():
    assert unplaced(CORE) == []
    assert [str(i) for i in upward(CORE)] == []


def test_there_is_no_import_cycle():
    assert cycles(CORE) == []


def test_at_most_one_exception_and_it_is_a_real_import():
    assert len(EXCEPTIONS) <= 1
    found = {(i.importer, i.imported) for i in imports(CORE)}
    for importer, imported in EXCEPTIONS:
        assert (f"rollout_core.{importer}", f"rollout_core.{imported}") in found, "a stale exception: remove it"


def _planted(tmp_path: Path, relative: str, edit) -> Path:
    copy = tmp_path / "rollout_core"
    shutil.copytree(CORE, copy, ignore=shutil.ignore_patterns("__pycache__", "assets"))
    path = copy / relative
    path.write_text(edit(path.read_text(encoding="utf-8")), encoding="utf-8")
    return copy


def test_the_checker_reports_an_upward_import_planted_at_the_top_of_the_maths(tmp_path: Path):
    copy = _planted(tmp_path, "maths/rollout.py", lambda text: "import rollout_core.cli\n" + text)
    assert Import("rollout_core.maths.rollout", "rollout_core.cli", 1) in upward(copy)
    assert any("rollout_core.maths.rollout" in group and "rollout_core.cli" in group for group in cycles(copy))
    assert upward(CORE) == []  # the copy, not the package, was changed


def test_the_checker_sees_lazy_and_type_checking_imports(tmp_path: Path):
    lazy = "\n\ndef _planted():\n    from rollout_core.figures.text import legend_html\n    return legend_html\n"
    copy = _planted(tmp_path, "maths/fusion.py", lambda text: text + lazy)
    assert [(i.importer, i.imported) for i in upward(copy)] == [("rollout_core.maths.fusion",
                                                                 "rollout_core.figures.text")]
    typing_only = "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from rollout_core import explain\n"
    copy = _planted(tmp_path / "second", "inputs/text.py", lambda text: text + typing_only)
    assert [(i.importer, i.imported) for i in upward(copy)] == [("rollout_core.inputs.text", "rollout_core.explain")]


def test_architecture_shows_the_layers():
    assert render() in (ROOT / "docs" / "ARCHITECTURE.md").read_text(encoding="utf-8")


def test_architecture_names_every_module():
    """docs/ARCHITECTURE.md's layout names every module of the package (a package by "name/"), so a new module is
    placed in the map when it is written."""
    doc = (ROOT / "docs" / "ARCHITECTURE.md").read_text(encoding="utf-8")

    def named(path: Path) -> bool:
        name = f"{path.parent.name}/" if path.name == "__init__.py" else path.name
        return re.search(rf"(?<!\w){re.escape(name)}", doc) is not None

    assert [str(path.relative_to(ROOT)) for path in sorted(CORE.rglob("*.py")) if not named(path)] == []
