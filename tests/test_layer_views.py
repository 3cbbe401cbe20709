"""Every slider position sent as numbers (rollout_core.figures.layer_views): complete, one colour scale per mode,
the numbers of each layer (checked against the explanation's own arrays, renormalised by hand), token texts and
the image sent once, and a size that grows as layers x tokens floats."""
from __future__ import annotations

import base64
import dataclasses
import json
import re
from typing import Any, Callable

import numpy as np
import pytest
import scipy.stats

from page_views import view_at
from rollout_core import explain
from rollout_core.figures import layer_views
from rollout_core.figures.layer_views import view_key

SENT = 0.5 * 10 ** (1 - layer_views.DIGITS)
"""Relative precision of the sent numbers (rounded to DIGITS significant digits)."""

def values(array: Any) -> np.ndarray:
    """A Plotly JSON array: a plain list or a typed array {"dtype", "bdata", "shape"?}."""
    if isinstance(array, dict):
        flat = np.frombuffer(base64.b64decode(array["bdata"]), dtype=array["dtype"])
        shape = array.get("shape")
        return flat.reshape([int(n) for n in str(shape).split(",")]) if shape else flat
    return np.asarray(array, dtype=np.float64)


def scale_top(shares: np.ndarray) -> float:
    """By hand: the colour scale's top, the largest share but at least twice the uniform share 1/n."""
    return max(float(shares.max()), 2.0 / shares.size)


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


def drawn(payload: dict[str, Any], layer: int, raw: bool) -> dict[str, Any]:
    """Slider position `layer` (1-based) as the browser draws it (page_views.view_at)."""
    return view_at({"payload": payload, "layer": layer, "raw": raw})


@pytest.mark.parametrize("shared", [False, True])
def test_text_payload_covers_every_layer_in_both_modes_with_that_layers_numbers(text_expl: Any, shared: bool) -> None:
    payload = layer_views.text_payload(text_expl, shared_scale=shared, level="token")
    layers = text_expl.num_layers
    assert {m: len(v) for m, v in payload["views"].items()} == {"cumulative": layers, "raw": layers}
    keep = ~np.asarray(text_expl.special, dtype=bool)
    for raw, rows in ((False, text_expl.layer_scores), (True, text_expl.layer_attention_scores)):
        expected = [shown_shares(np.asarray(rows[i], np.float64), keep) for i in range(layers)]
        tops = [scale_top(e) for e in expected]
        top = max(tops)
        for i in range(layers):
            view = drawn(payload, i + 1, raw)
            assert view["marker"] == view_key(i + 1, raw)
            bars = view["figures"][0]["data"][0]
            np.testing.assert_allclose(values(bars["y"]), expected[i], rtol=SENT)
            # shared: one scale while the slider moves; else each layer up to its own largest share
            assert bars["marker"]["cmax"] == pytest.approx(top if shared else tops[i])
            assert f'data-view="{view_key(i + 1, raw)}"' in view["html"]
            scores = [float(s) for s in re.findall(r'data-score="([^"]+)"', view["html"])]
            assert max(scores) == pytest.approx(float(expected[i].max()), rel=SENT)


def test_values_are_sent_to_four_significant_digits() -> None:
    assert layer_views.rounded(np.array([[0.123456, 1.23456e-7], [0.0, 0.5]])) == [0.1235, 1.235e-7, 0.0, 0.5]


def test_token_texts_are_sent_once_and_the_pieces_spell_the_text(text_expl: Any) -> None:
    payload = layer_views.text_payload(text_expl)
    assert len(payload["views"]["cumulative"]) > 1
    # once per panel, not per view: the highlight's pieces, the bars' hover labels and tick labels
    assert json.dumps(payload).count('"film"') == 3
    assert json.dumps(layer_views.text_payload(text_expl, figures=False)).count('"film"') == 1
    (panel,) = [p for p in payload["panels"] if p["kind"] == "highlight"]
    assert "".join("".join(runs[::2]) for _, *runs in panel["pieces"]) == "the film was good but far too long"
    units = [unit for unit, *_ in panel["pieces"] if unit >= 0]
    assert units == list(range(len(units)))  # each shown token once, in reading order


def test_control_characters_are_sent_as_codes_between_text_runs() -> None:
    from rollout_core.figures.text import code_runs

    assert code_runs("plain") == ["plain"]
    assert code_runs("a\u202eb\u2066") == ["a", "\\u202e", "b", "\\u2066", ""]


def test_image_payload_draws_each_layers_patch_map(image_expl: Any) -> None:
    payload = layer_views.image_payload(image_expl, opacity=0.3, colormap="viridis")
    rows, cols = image_expl.grid
    patches = np.asarray(image_expl.patch_positions)
    for raw, source in ((False, image_expl.layer_scores), (True, image_expl.layer_attention_scores)):
        for i in range(image_expl.num_layers):
            view = drawn(payload, i + 1, raw)
            overlay, grid = view["figures"]
            row = np.asarray(source[i], np.float64)[patches]
            expected = (row / row.sum()).reshape(rows, cols)
            np.testing.assert_allclose(np.array(grid["data"][0]["z"]), expected, rtol=SENT)
            heat = [t for t in overlay["data"] if t["type"] == "heatmap"][-1]
            np.testing.assert_allclose(np.array(heat["z"]), expected, rtol=SENT)
            assert heat["opacity"] == pytest.approx(0.3) and heat["colorscale"][-1][1] == "#fde725"  # viridis
            assert f'data-view="{view_key(i + 1, raw)}"' in view["html"]


def test_image_payload_scales_each_layer_to_its_own_maximum_unless_shared(image_expl: Any) -> None:
    patches = np.asarray(image_expl.patch_positions)
    rows = [np.asarray(r, np.float64)[patches] for r in image_expl.layer_attention_scores]
    shares = [r / r.sum() for r in rows]
    last = image_expl.num_layers
    for shared, top in ((False, scale_top(shares[-1])), (True, max(scale_top(s) for s in shares))):
        overlay, grid = drawn(layer_views.image_payload(image_expl, shared_scale=shared), last, True)["figures"]
        heat = [t for t in overlay["data"] if t["type"] == "heatmap"][-1]
        assert heat["zmax"] == pytest.approx(top) and grid["data"][0]["zmax"] == pytest.approx(top)


def test_the_image_is_sent_once_and_the_id_follows_the_content(image_expl: Any, text_expl: Any) -> None:
    payload = layer_views.image_payload(image_expl)
    image = payload["panels"][0]["figure"]["data"][0]["source"]
    assert image.startswith("data:image/png;base64,") and json.dumps(payload).count(image[:200]) == 1
    assert layer_views.image_payload(image_expl)["id"] == payload["id"]
    assert layer_views.image_payload(image_expl, colormap="viridis")["id"] != payload["id"]
    rows = np.full(text_expl.layer_scores.shape, 0.01)
    rows[:, text_expl.display_positions()[0]] = np.linspace(1.0, 0.3, len(rows))  # each layer its own top
    peaked = dataclasses.replace(text_expl, layer_scores=rows)
    assert layer_views.text_payload(peaked, shared_scale=True)["id"] != layer_views.text_payload(peaked)["id"]


def test_payload_grows_with_layers_times_tokens_floats(tiny_handle: Callable[[str], object]) -> None:
    short = explain.explain_text(tiny_handle("bert"), "good film")
    long = explain.explain_text(tiny_handle("bert"), " ".join(["a good film"] * 20))
    sizes = [len(json.dumps(layer_views.text_payload(e)["views"])) for e in (short, long)]
    values_more = (len(long.display_positions()) - len(short.display_positions())) * 2 * long.num_layers
    assert (sizes[1] - sizes[0]) / values_more < 12  # bytes per extra value: a rounded float and a comma


def test_comparison_payload_agreement_is_that_layers_spearman(tiny_handle: Callable[[str], object]) -> None:
    handle = tiny_handle("bert")
    text = "the film was good but far too long"
    a = explain.explain_text(handle, text, method="rollout")
    b = explain.explain_text(handle, text, method="attention")
    payload = layer_views.comparison_payload(a, b)
    keep = ~np.asarray(a.special, dtype=bool)
    for i in range(a.num_layers):
        view = drawn(payload, i + 1, False)
        rho = scipy.stats.spearmanr(np.asarray(a.layer_scores[i])[keep], np.asarray(b.layer_scores[i])[keep])[0]
        assert f"Spearman rank correlation</b> {rho:.3f}" in view["html"]
        assert view["html"].count("token-highlight") == 2
        assert view["summary"].startswith("A: ") and "\n\nB: " in view["summary"]


def test_the_highlight_is_per_word_by_default_with_pieces_summed(tiny_handle: Callable[[str], object]) -> None:
    expl = explain.explain_text(tiny_handle("bert"), "unbelievably crushes, truly")
    assert len(expl.display_tokens()) > 4  # the tokenizer cuts the words into pieces
    payload = layer_views.text_payload(expl)
    pieces = payload["panels"][0]["pieces"]
    assert "".join("".join(runs) for _, *runs in pieces) == expl.text  # the text, whole
    assert [("".join(runs)) for unit, *runs in pieces if unit >= 0] == ["unbelievably", "crushes", ",", "truly"]
    for i in range(expl.num_layers):  # each word's value is the sum of its pieces' shares (compare.word_scores)
        by_hand = np.zeros(4)
        shares = expl.display_scores(expl.layer_scores[i])
        for share, (start, _) in zip(shares, [expl.offsets[p] for p in expl.display_positions()]):
            word = next(k for k, (s, e) in enumerate([(0, 12), (13, 20), (20, 21), (22, 27)]) if s <= start < e)
            by_hand[word] += share
        np.testing.assert_allclose(drawn(payload, i + 1, False)["figures"][0]["data"][0]["y"], by_hand, rtol=SENT)
    tokens = layer_views.text_payload(expl, level="token")["panels"][0]["pieces"]
    assert sum(unit >= 0 for unit, *_ in tokens) == len(expl.display_tokens())  # tokens on request
