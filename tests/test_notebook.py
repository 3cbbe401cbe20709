"""docs/examples/quickstart.ipynb runs top to bottom in a real kernel (nbclient) and shows the rendered views."""
from __future__ import annotations

import html
import re
from pathlib import Path

import pytest

from rollout_core.models import registry

pytestmark = pytest.mark.slow  # the whole module: see the fast tier in pyproject.toml

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOK = ROOT / "docs" / "examples" / "quickstart.ipynb"


def _outputs(cell) -> dict[str, str]:
    """mime type -> content of a code cell's displayed result (errors fail the run before this)."""
    out: dict[str, str] = {}
    for output in cell.get("outputs", []):
        for mime, content in output.get("data", {}).items():
            out[mime] = content if isinstance(content, str) else "".join(content)
    return out


def _srcdoc(markup: str) -> str:
    match = re.fullmatch(r'<iframe class="rollout-explorer" srcdoc="([^"]*)"[^>]*></iframe>', markup)
    assert match, markup[:200]
    return html.unescape(match.group(1))


@pytest.mark.slow
def test_quickstart_notebook_executes_and_renders_the_explorer(tmp_path, monkeypatch):
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    for name in ("default-text", "default-image"):
        if not registry.is_available(registry.lookup(name)):
            pytest.skip(f"{name} is not built: {registry.SETUP_HINT}")
    monkeypatch.setenv("PYTHONPATH", str(ROOT))  # the kernel imports this checkout's rollout_core
    nb = nbformat.read(NOTEBOOK, as_version=4)
    assert not any(c.get("outputs") for c in nb.cells if c.cell_type == "code"), "commit the notebook without outputs"
    nbclient.NotebookClient(nb, kernel_name="python3", timeout=600,
                            resources={"metadata": {"path": str(tmp_path)}}).execute()
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert "NEGATIVE" in _outputs(code[0])["text/plain"]

    text_page = _srcdoc(_outputs(code[1])["text/html"])
    assert "window.rolloutLayerExplorer" in text_page and "waiter" in text_page
    assert '"marker": "layer-6-cum"' in text_page and '"layer": 6' in text_page  # default-text: 6 layers, the last

    assert _outputs(code[2])["text/plain"] == "True"
    svg = _outputs(code[3])["image/svg+xml"]
    assert svg.startswith("<svg") and ">waiter</text>" in svg

    image_page = _srcdoc(_outputs(code[4])["text/html"])
    assert 'class=\\"image-view\\"' in image_page and "Plotly.react" in image_page
    assert "<script>/**\n* plotly.js v" in image_page  # inlined: the figures draw offline
