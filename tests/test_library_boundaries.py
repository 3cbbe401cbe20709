"""The core is a library: it must not import Streamlit, and importing it must stay cheap."""
import ast
import subprocess
import sys
from pathlib import Path

CORE = Path(__file__).resolve().parents[1] / "rollout_core"


def _imported_modules(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module.split(".")[0])
    return names


def test_core_never_imports_streamlit():
    offenders = [str(p.relative_to(CORE)) for p in CORE.rglob("*.py") if "streamlit" in _imported_modules(p)]
    assert offenders == []


def test_import_is_lazy():
    code = "import sys, rollout_core; print('torch' in sys.modules, 'streamlit' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=CORE.parent)
    assert out.stdout.split() == ["False", "False"]


def test_unknown_public_name_is_an_attribute_error():
    import rollout_core

    try:
        rollout_core.no_such_name  # noqa: B018
    except AttributeError as err:
        assert "no_such_name" in str(err)
    else:
        raise AssertionError("expected AttributeError")
