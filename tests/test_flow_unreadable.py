"""Issue 26 item 7: a pruned flow whose error bound is larger than its map is "not meaningful here", and no view
prints or draws that map as if it were one: the CLI says so instead of the patch table, the Image and Compare
pages instead of the maps (the note stays beside the prediction)."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Callable

import numpy as np
import pytest
from page_views import explorers, page

from rollout_core.cli import render_image
from rollout_core.data.example_images import example_images
from rollout_core.maths import flow_bounded

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture()
def huge_bound(monkeypatch: pytest.MonkeyPatch) -> None:
    """The real pruned rows, with a bound 10x the map's largest value (as DINOv2's photos give)."""
    real = flow_bounded.bounded_attention_flow

    def bounded(*args, **kwargs):
        result = real(*args, **kwargs)
        return flow_bounded.FlowResult(result.values, 10.0 * float(result.values.abs().max()))

    monkeypatch.setattr(flow_bounded, "bounded_attention_flow", bounded)


def test_the_cli_prints_no_map_that_is_not_meaningful(tiny_handle, huge_bound):
    from rollout_core.explain import explain_image

    image = explain_image(tiny_handle("vit"), np.zeros((32, 32, 3), dtype=np.uint8) + 100, method="flow")
    assert image.not_meaningful.startswith("Attention flow is not meaningful here")
    shown = render_image(image)
    assert "map not shown: it is not meaningful here" in shown and "note: Attention flow is not meaningful" in shown
    assert "patch map" not in shown and "strongest patches" not in shown
    readable = explain_image(tiny_handle("vit"), np.zeros((32, 32, 3), dtype=np.uint8) + 100, method="rollout")
    assert readable.not_meaningful == "" and "strongest patches" in render_image(readable)


@pytest.mark.slow
def test_the_cli_on_dinov2_small_flow_says_not_meaningful_and_prints_no_map():
    """The reproduction: dinov2-small's flow on a bundled photo has a bound of about 10x its map."""
    photo = str(example_images()["coffee"])
    run = subprocess.run([sys.executable, "-m", "rollout_core", "image", photo, "--model", "dinov2-small",
                          "--method", "flow"], capture_output=True, text=True, cwd=ROOT, timeout=600,
                         env={"ROLLOUT_SERVER": "off", "PATH": "/usr/bin:/bin", "HOME": str(Path.home())})
    assert run.returncode == 0, run.stderr
    assert "attention flow: not meaningful here" in run.stdout and "map not shown" in run.stdout
    assert "patch map" not in run.stdout and "strongest patches" not in run.stdout


def test_the_image_page_draws_no_map_that_is_not_meaningful(tiny_model_dir: Callable[[str], Path], huge_bound):
    at = page("app_pages/image.py", model=str(tiny_model_dir("vit")), method="flow")
    assert not at.exception and not at.error, [e.value for e in at.error]
    assert any("No map drawn" in w.value for w in at.warning), [w.value for w in at.warning]
    assert explorers(at) == [], "no layer view of a map that cannot be read"
    at = page("app_pages/image.py", model=str(tiny_model_dir("vit")), method="rollout")
    assert not any("No map drawn" in w.value for w in at.warning) and len(explorers(at)) == 1


def test_the_compare_page_compares_no_map_that_is_not_meaningful(tiny_model_dir: Callable[[str], Path], huge_bound):
    at = page("app_pages/compare.py", modality="image", model=str(tiny_model_dir("vit")), method="flow",
              mode="methods", b_method="rollout")
    assert not at.exception and not at.error, [e.value for e in at.error]
    assert any("side A" in w.value and "not meaningful" in w.value for w in at.warning), [w.value for w in at.warning]
    assert explorers(at) == []


def test_a_missing_matrix_is_not_called_too_costly():
    """Issue 26: "too costly ... about 0.00086 s": a matrix that was not asked for is said to be not computed."""
    from explanations import make_explanation

    from rollout_core.errors import InputError
    from rollout_core.figures import matrix_heatmap

    with pytest.raises(InputError) as err:
        matrix_heatmap(make_explanation(["[CLS]", "a", "b"], [0.2, 0.5, 0.3], method="flow"))
    assert "too costly" not in str(err.value) and "only the explained row was computed" in str(err.value)
