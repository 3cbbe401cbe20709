"""Every slider position drawn ahead of time (rollout_core.figures.layer_views): complete, one colour scale per
mode, the numbers of each layer (checked against the explanation's own arrays, renormalised by hand), and a
payload that restores every view exactly while sending a repeated image only once."""
from __future__ import annotations

import base64
import json
import re
from typing import Any, Callable

import numpy as np
import pytest
import scipy.stats

from page_views import unshare
from rollout_core import explain
from rollout_core.figures import layer_views
from rollout_core.figures.layer_views import LayerView, view_key, views_payload


def values(array: Any) -> np.ndarray:
    """A Plotly JSON array: a plain list or a typed array {"dtype", "bdata", "shape"?}."""
    if isinstance(array, dict):
        flat = np.frombuffer(base64.b64decode(array["bdata"]), dtype=array["dtype"])
        shape = array.get("shape")
        return flat.reshape([int(n) for n in str(shape).split(",")]) if shape else flat
    return np.asarray(array, dtype=np.float64)


def shown_shares(row: np.ndarray, keep: np.ndarray) -> np.ndarray:
    """By hand: the row restricted to the displayed positions, renormalised to sum to 1."""
    kept = row[keep]
    return kept / kept.sum()


@pytest.fixture(scope="module")
def text_expl(tiny_handle: Callable[[str], object]) -> Any:
    return explain.explain_text(tiny_handle("bert"), "the film was good but far too long")


@pytest.fixture(scope="module")
def image_expl(tiny_handle: Callable[[str], object]) -> Any:
    rng = np.random.default_rng(0)
    return explain.explain_image(tiny_handle("vit"), rng.integers(0, 256, (40, 40, 3), dtype=np.uint8))


@pytest.mark.parametrize("shared", [False, True])
def test_text_views_cover_every_layer_in_both_modes_with_that_layers_numbers(text_expl: Any, shared: bool) -> None:
    views = layer_views.text_views(text_expl, shared_scale=shared)
    layers = text_expl.num_layers
    assert set(views) == {view_key(k, raw) for k in range(1, layers + 1) for raw in (False, True)}
    keep = ~np.asarray(text_expl.special, dtype=bool)
    for raw, rows in ((False, text_expl.layer_scores), (True, text_expl.layer_attention_scores)):
        expected = [shown_shares(np.asarray(rows[i], np.float64), keep) for i in range(layers)]
        top = max(float(e.max()) for e in expected)
        for i in range(layers):
            view = views[view_key(i + 1, raw)]
            bars = json.loads(view.figures[0].to_json())["data"][0]
            np.testing.assert_allclose(values(bars["y"]), expected[i], rtol=1e-9)
            # shared: one scale while the slider moves; else each layer up to its own largest share
            assert bars["marker"]["cmax"] == pytest.approx(top if shared else float(expected[i].max()))
            assert f'data-view="{view_key(i + 1, raw)}"' in view.html
            scores = [float(s) for s in re.findall(r'data-score="([^"]+)"', view.html)]
            assert max(scores) == pytest.approx(float(expected[i].max()))


def test_image_views_draw_each_layers_patch_map(image_expl: Any) -> None:
    views = layer_views.image_views(image_expl, opacity=0.3, colormap="viridis")
    rows, cols = image_expl.grid
    patches = np.asarray(image_expl.patch_positions)
    for raw, source in ((False, image_expl.layer_scores), (True, image_expl.layer_attention_scores)):
        for i in range(image_expl.num_layers):
            overlay, grid = (json.loads(f.to_json()) for f in views[view_key(i + 1, raw)].figures)
            row = np.asarray(source[i], np.float64)[patches]
            expected = (row / row.sum()).reshape(rows, cols)
            np.testing.assert_allclose(values(grid["data"][0]["z"]), expected, rtol=1e-9)
            heat = [t for t in overlay["data"] if t["type"] == "heatmap"][-1]
            np.testing.assert_allclose(values(heat["z"]), expected, rtol=1e-9)
            assert heat["opacity"] == pytest.approx(0.3)


def test_image_views_scale_each_layer_to_its_own_maximum_unless_shared(image_expl: Any) -> None:
    patches = np.asarray(image_expl.patch_positions)
    rows = [np.asarray(r, np.float64)[patches] for r in image_expl.layer_attention_scores]
    shares = [r / r.sum() for r in rows]
    last = image_expl.num_layers
    for shared, top in ((False, float(shares[-1].max())), (True, max(float(s.max()) for s in shares))):
        views = layer_views.image_views(image_expl, shared_scale=shared)
        overlay, grid = (json.loads(f.to_json()) for f in views[view_key(last, True)].figures)
        heat = [t for t in overlay["data"] if t["type"] == "heatmap"][-1]
        assert heat["zmax"] == pytest.approx(top) and grid["data"][0]["zmax"] == pytest.approx(top)


def test_payload_restores_every_view_and_sends_a_repeated_image_once(image_expl: Any) -> None:
    views = layer_views.image_views(image_expl)
    payload = views_payload(views)
    image = json.loads(views[view_key(1, False)].figures[0].to_json())["data"][0]["source"]
    assert payload["shared"] == [image]  # the PNG under every overlay, stored once
    assert json.dumps(payload).count(image[:200]) == 1
    for key, view in views.items():
        layer, raw = int(key.split("-")[1]), key.endswith("-raw")  # view_key's documented form "layer-3-cum"
        restored = unshare(payload["views"]["raw" if raw else "cumulative"][layer - 1], payload["shared"])
        assert restored["marker"] == key
        assert restored["html"] == view.html and restored["summary"] == view.summary
        for fig, spec in zip(view.figures, restored["figures"]):
            original = json.loads(fig.to_json())
            assert original["layout"].pop("template") == payload["template"]
            assert spec == original


def test_payload_shares_only_long_strings_seen_in_two_views_and_its_id_follows_the_content() -> None:
    long_text = "x" * layer_views.SHARED_MIN_CHARS
    views = {"layer-1-cum": LayerView(html=long_text, summary="short"),
             "layer-1-raw": LayerView(html=long_text, summary="short"),
             "layer-2-cum": LayerView(html="y" * (2 * layer_views.SHARED_MIN_CHARS)), "layer-2-raw": LayerView()}
    payload = views_payload(views)
    cumulative, raw = payload["views"]["cumulative"], payload["views"]["raw"]
    assert payload["shared"] == [long_text]
    assert raw[0]["html"] == {"$shared": 0} and raw[0]["summary"] == "short" and cumulative[0]["html"] == {"$shared": 0}
    assert cumulative[1]["html"] == "y" * (2 * layer_views.SHARED_MIN_CHARS)  # in one view only
    assert views_payload(dict(views))["id"] == payload["id"]
    changed = {**views, "layer-2-cum": LayerView(html="z")}
    assert views_payload(changed)["id"] != payload["id"]
    with pytest.raises(ValueError, match="every layer in both modes"):
        views_payload({"layer-1-cum": LayerView(), "layer-3-raw": LayerView()})


def test_comparison_views_agreement_is_that_layers_spearman(tiny_handle: Callable[[str], object]) -> None:
    handle = tiny_handle("bert")
    text = "the film was good but far too long"
    a = explain.explain_text(handle, text, method="rollout")
    b = explain.explain_text(handle, text, method="attention")
    views = layer_views.comparison_views(a, b)
    keep = ~np.asarray(a.special, dtype=bool)
    for i in range(a.num_layers):
        view = views[view_key(i + 1, False)]
        rho = scipy.stats.spearmanr(np.asarray(a.layer_scores[i])[keep], np.asarray(b.layer_scores[i])[keep])[0]
        assert f"Spearman rank correlation</b> {rho:.3f}" in view.html
        assert view.html.count("token-highlight") == 2
        assert view.summary.startswith("A: ") and "\n\nB: " in view.summary
