"""The explorer's data contract (rollout_core/figures/explorer_payload.py): every payload fits its TypedDicts,
views are arrays indexed by layer, and the JS builds no keys or trace names of its own and puts token texts in
as text, never as HTML."""
from __future__ import annotations

import re
from typing import Any, Callable

import numpy as np
import pytest

from payload_contract import contract_errors
from rollout_core import explain
from rollout_core.figures import layer_views
from rollout_core.figures.explorer_payload import ExplorerData, Payload
from rollout_core.figures._common import scale_stops
from rollout_core.figures.image import IMAGE_TRACE, OVERLAY_TRACE
from rollout_core.figures.standalone import explorer_asset, explorer_data


@pytest.fixture(scope="module")
def expls(tiny_handle: Callable[[str], object]) -> dict[str, Any]:
    text = "the film was good but far too long"
    image = np.random.default_rng(0).integers(0, 256, (40, 40, 3), dtype=np.uint8)
    return {"text": explain.explain_text(tiny_handle("bert"), text),
            "text_b": explain.explain_text(tiny_handle("bert"), text, method="attention"),
            "image": explain.explain_image(tiny_handle("vit"), image)}


def test_the_checker_catches_a_missing_key_an_extra_key_and_a_wrong_type() -> None:
    good = {"id": "x", "panels": [], "views": {"cumulative": [], "raw": []}, "template": None, "scales": {}}
    assert contract_errors(good, Payload) == []
    assert contract_errors({k: v for k, v in good.items() if k != "scales"}, Payload)
    assert contract_errors({**good, "extra": 1}, Payload)
    assert contract_errors({**good, "views": {"cumulative": [], "raw": [{"html": 3}]}}, Payload)
    assert contract_errors({**good, "views": {"layer-1-cum": []}}, Payload)
    piece = {"kind": "highlight", "series": 0, "heading": "", "scale": "", "figure": {}, "trace": 0, "rows": 0}
    assert contract_errors({**good, "panels": [{**piece, "pieces": [[0, "a"]]}]}, Payload) == []
    assert contract_errors({**good, "panels": [{**piece, "pieces": [[0, 1.5]]}]}, Payload)


def test_every_payload_fits_the_contract_and_indexes_views_by_layer(expls: dict[str, Any]) -> None:
    payloads = [layer_views.text_payload(expls["text"]),
                layer_views.image_payload(expls["image"], shared_scale=True),
                layer_views.comparison_payload(expls["text"], expls["text_b"])]
    for payload in payloads:
        assert contract_errors(payload, Payload) == []
        for views in payload["views"].values():
            for view in views:  # one PanelView per panel; every series has its top
                assert len(view["panels"]) == len(payload["panels"]) and len(view["tops"]) == len(view["series"])
    assert [p["kind"] for p in payloads[1]["panels"]] == ["map", "map"]
    assert payloads[0]["scales"] == {"YlOrRd": scale_stops("YlOrRd")}  # what the highlight is coloured with
    layers = expls["text"].num_layers
    for name, suffix in (("cumulative", "cum"), ("raw", "raw")):
        markers = [v["marker"] for v in payloads[0]["views"][name]]
        assert markers == [f"layer-{k}-{suffix}" for k in range(1, layers + 1)]
        for k, view in enumerate(payloads[0]["views"][name], start=1):
            assert view["panels"][0]["marker"] == f"layer-{k}-{suffix}"  # the highlight's marker is the view's own
        assert [v["panels"][0]["marker"] for v in payloads[2]["views"][name]] == [
            f"A-layer-{k}-{suffix}" for k in range(1, layers + 1)]


@pytest.mark.parametrize("kind", ["text", "image"])
def test_standalone_data_fits_the_contract(expls: dict[str, Any], kind: str) -> None:
    data = explorer_data(expls[kind], layer=0, raw_attention=True)
    assert contract_errors(data, ExplorerData) == []
    assert [c["trace"] for c in data["controls"]] == ([OVERLAY_TRACE] if kind == "image" else [])


def key_builders(source: str) -> list[str]:
    """Template literals (comments left out) that interpolate a layer and a mode, as a view key would."""
    code = re.sub(r"^\s*//.*$", "", source, flags=re.MULTILINE)
    templates = re.findall(r"`[^`]*`", code)
    return [t for t in templates if re.search(r"\$\{[^}]*layer", t) and re.search(r"\$\{[^}]*(raw|mode)", t)]


def test_the_js_builds_no_view_keys_and_names_no_traces() -> None:
    source = explorer_asset("js")
    assert "viewKey" not in source and "layer-" not in source and '"cum"' not in source
    assert key_builders(source) == []
    assert key_builders('const k = `layer-${layer}-${raw ? "raw" : "cum"}`;')  # what the check catches
    for trace in (IMAGE_TRACE, OVERLAY_TRACE):
        assert f'"{trace}"' not in source and f"'{trace}'" not in source
    assert "views[mode][i]" in source  # a view is found by index, not by a built key


def test_the_raw_toggle_names_what_the_per_layer_view_shows(tiny_handle: Callable[[str], object]) -> None:
    """ALTI's per-layer view is its contributions (layer_maps), not the layer's attention: the toggle says so."""
    handle = tiny_handle("bert")
    alti = explorer_data(explain.explain_text(handle, "a good film", method="alti"), figures=False)["raw_label"]
    assert "ALTI contributions" in alti and "attention" not in alti
    rollout = explain.explain_text(handle, "a good film", method="rollout")
    assert explorer_data(rollout, figures=False)["raw_label"] == "Show this layer's own attention instead"


def test_the_js_puts_user_text_in_as_text_only() -> None:
    """Only fixed markup and the core's escaped `html` go in as HTML; pieces, headings and titles never do."""
    source = explorer_asset("js")
    assigned = re.findall(r"innerHTML\s*=\s*(`[^`]*`|'[^']*'|[\w.]+)", source)
    assert len(assigned) == source.count("innerHTML") == 3
    for value in assigned:
        assert value == "view.html" or (value[0] in "`'" and "${" not in value), value
