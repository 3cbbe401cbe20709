"""Compare's colour scales (one for both sides or each its own) and its image sides (photo under each map)."""
from __future__ import annotations

from pathlib import Path
from typing import Callable

import numpy as np
import pytest

from page_views import explorers, view_at
from rollout_core.figures import layer_views
from test_figures import _image_expl
from test_pages_apptest import assert_clean, page, texts


def _pair():
    strong = np.array([[0.8, 0.1], [0.05, 0.05]])
    faint = np.array([[0.2, 0.3], [0.25, 0.25]])  # shares of the shown mass: both sum to 1
    a, b = _image_expl(strong), _image_expl(faint)
    return a, b


def _first_view(a, b, **options) -> dict:
    """Slider position 1 (cumulative) of the compare payload, as the browser draws it."""
    return view_at({"payload": layer_views.comparison_payload(a, b, **options), "layer": 1, "raw": False})


def _patch_tops(view: dict) -> list[float]:
    return [next(t for t in fig["data"] if t["name"] == "patches")["zmax"] for fig in view["figures"][:2]]


def test_one_scale_for_both_sides_is_the_larger_maximum() -> None:
    a, b = _pair()
    view = _first_view(a, b)
    assert _patch_tops(view) == pytest.approx([0.8, 0.8])  # the faint side on the strong side's scale


def test_each_side_its_own_scale_keeps_the_faint_side_visible() -> None:
    a, b = _pair()
    view = _first_view(a, b, sides="each")
    # the faint side on its own scale: its largest share 0.3 is below twice the uniform share of its 4 patches,
    # so its scale tops at 0.5 (a near-flat map reads pale, not stretched to the darkest colour)
    assert _patch_tops(view) == pytest.approx([0.8, 0.5])
    with pytest.raises(ValueError):
        layer_views.comparison_payload(a, b, sides="both")


def test_image_sides_draw_the_photo_under_a_titled_map() -> None:
    a, b = _pair()
    view = _first_view(a, b)
    for fig, side in zip(view["figures"][:2], "AB"):
        assert [t["name"] for t in fig["data"]] == ["image", "patches"]
        assert fig["layout"]["title"]["text"].startswith(f"{side}: hand · Attention rollout up to layer 1")
    assert "<p><b></b></p>" not in view["html"] and "image-view" not in view["html"]  # no empty headers
    a.model_name = "<b>x</b>"
    title = _first_view(a, b)["figures"][0]["layout"]["title"]["text"]
    assert "<b>" not in title and "&lt;b&gt;" in title


def test_compare_page_on_images_offers_both_scales_and_overlays(tiny_model_dir: Callable[[str], Path]) -> None:
    at = page("app_pages/compare.py", model=str(tiny_model_dir("vit")), modality="image", sides="each")
    assert_clean(at)
    assert not at.error, texts(at.error)
    assert at.radio(key="sides").value == "each"
    (data,) = explorers(at)
    shown = view_at(data)
    assert [[t["name"] for t in fig["data"]] for fig in shown["figures"][:2]] == [["image", "patches"]] * 2
    assert [c["key"] for c in data["controls"]] == ["opacity"]
    at.radio(key="sides").set_value("shared").run()
    assert_clean(at)
    assert "sides" not in at.query_params  # the default is not written into the link


def test_side_layer_follows_each_sides_own_depth() -> None:
    assert [layer_views.side_layer(p, 12, 6) for p in range(12)] == [0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5]
    assert [layer_views.side_layer(p, 12, 12) for p in range(12)] == list(range(12))
    assert [layer_views.side_layer(p, 3, 2) for p in range(3)] == [0, 1, 1]


def test_sides_of_different_depths_each_reach_their_final_map(tiny_handle: Callable[[str], object]) -> None:
    from rollout_core import explain

    text = "the film was good but far too long"
    a, b = explain.explain_text(tiny_handle("bert"), text), explain.explain_text(tiny_handle("roberta"), text)
    assert (a.num_layers, b.num_layers) == (2, 3)
    payload = layer_views.comparison_payload(a, b)
    assert len(payload["views"]["cumulative"]) == 3  # the deeper side's depth, not the shallower one's
    for position, (ia, ib) in enumerate([(0, 0), (1, 1), (1, 2)]):
        view = payload["views"]["cumulative"][position]
        for series, expl, index in ((view["series"][0], a, ia), (view["series"][1], b, ib)):
            np.testing.assert_allclose(series, expl.display_scores(expl.layer_scores[index]), rtol=1e-3, atol=1e-6)
        titles = [p["title"] for p in view["panels"]]
        assert titles == [f"Attention rollout up to layer {ia + 1} of 2" + (" (final)" if ia == 1 else ""),
                          f"Attention rollout up to layer {ib + 1} of 3" + (" (final)" if ib == 2 else "")]
        assert view["position"] == f"A layer {ia + 1} of 2 · B layer {ib + 1} of 3"
    last = payload["views"]["cumulative"][-1]["series"]  # the last position compares both final maps
    np.testing.assert_allclose(last[0], a.display_scores(), rtol=1e-3, atol=1e-6)
    np.testing.assert_allclose(last[1], b.display_scores(), rtol=1e-3, atol=1e-6)


def test_compare_page_slider_covers_the_deeper_model(tiny_model_dir: Callable[[str], Path]) -> None:
    at = page("app_pages/compare.py", model=str(tiny_model_dir("bert")), mode="models",
              model_b=str(tiny_model_dir("roberta")), text="the film was good")
    assert_clean(at)
    (data,) = explorers(at)
    assert (data["layers"], data["layer"]) == (3, 3)
    assert [p["title"] for p in data["payload"]["views"]["cumulative"][-1]["panels"]] == [
        "Attention rollout up to layer 2 of 2 (final)", "Attention rollout up to layer 3 of 3 (final)"]
