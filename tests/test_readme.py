"""README.md as a newcomer meets it: at most 160 lines, the two commands first, the method table equal to the
registry's, every method and extra named, and every fenced Python and shell block run as written from a scratch
folder outside the repository (a block preceded by `<!-- readme-test: skip: reason -->` is left out)."""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from rollout_core import methods
from rollout_core.models import registry

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
TEXT = README.read_text(encoding="utf-8")
FENCE = re.compile(r"^```(\w+)\n(.*?)^```\n", flags=re.S | re.M)
SKIP = re.compile(r"<!-- readme-test: skip: [^>]+-->\s*$")
TWO_COMMANDS = "bash scripts/start.sh", "bash scripts/test.sh"


def _readme_methods():
    sys.path.insert(0, str(ROOT / "scripts"))
    try:
        import readme_methods
    finally:
        sys.path.remove(str(ROOT / "scripts"))
    return readme_methods


def blocks() -> list[tuple[str, str, bool]]:
    """(language, body, skipped) of every fenced block, in order."""
    return [(m.group(1), m.group(2), bool(SKIP.search(TEXT[:m.start()].rstrip("\n").rsplit("\n", 1)[-1])))
            for m in FENCE.finditer(TEXT)]


def test_at_most_160_lines_and_the_two_commands_come_first():
    assert len(TEXT.splitlines()) <= 160
    language, body, _ = blocks()[0]
    assert TEXT.startswith("```bash\n") and language == "bash"
    assert tuple(line.split("#")[0].strip() for line in body.splitlines()) == TWO_COMMANDS
    assert "bash scripts/test.sh" in (ROOT / ".ci" / "run").read_text(encoding="utf-8")  # CI runs the README's command


def test_method_table_is_the_registrys_and_names_every_method():
    readme_methods = _readme_methods()
    assert readme_methods.current_block(TEXT) == readme_methods.methods_block(), \
        "the README's method table is stale: run python scripts/readme_methods.py"
    for name in methods.names():
        assert f"`{name}`" in TEXT


def test_every_extra_is_named():
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["optional-dependencies"]
    for extra in extras:
        assert f"`[{extra}]`" in TEXT, extra


def test_relative_links_lead_to_files():
    for target in re.findall(r"\]\(([^)#]+)\)", TEXT):
        if not target.startswith(("http://", "https://")):
            assert (ROOT / target).exists(), target


@pytest.mark.slow
def test_every_block_runs_from_a_scratch_folder(tmp_path):
    for name in ("default-text", "default-image"):
        if not registry.is_available(registry.lookup(name)):
            pytest.skip(f"{name} is not built: {registry.SETUP_HINT}")
    if shutil.which("rollout") is None:
        pytest.skip("the project is not installed (bash scripts/install.sh installs it): no `rollout` command")
    from PIL import Image

    from rollout_core.data.example_images import example_images

    # what a reader has at hand for the examples: a photo and a CSV with a text column
    Image.open(example_images()["chelsea"]).convert("RGB").save(tmp_path / "photo.jpg")
    (tmp_path / "reviews.csv").write_text('text\n"Great value, works perfectly."\nIt broke after two days.\n'
                                          "The staff were friendly and quick.\n", encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1",
           "ROLLOUT_SERVER": "off"}  # this checkout's code, run from outside it
    ran = 0
    for language, body, skipped in blocks()[1:]:
        if skipped or language not in ("python", "bash", "sh"):
            continue
        command = [sys.executable, "-c", body] if language == "python" else ["bash", "-e", "-o", "pipefail", "-c", body]
        proc = subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
        assert proc.returncode == 0, f"README block failed:\n{body}\n{proc.stderr[-3000:]}"
        ran += 1
    assert ran >= 2  # the Python quickstart and the CLI lines at least
    assert (tmp_path / "view.html").is_file() and (tmp_path / "photo.json").is_file()
    assert any((tmp_path / "reviews").glob("*.parquet"))
