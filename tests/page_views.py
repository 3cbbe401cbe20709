"""What a page shows under AppTest, including the layer explorer, whose views are switched in the browser.

The explorer (app_pages/_lib/layer_explorer.py) sends every slider position at once; the browser shows the
one at the data's (layer, raw). These helpers read that view out of the element, so AppTest tests can check
what a user sees first (the interaction itself is tested in tests/browser).
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import streamlit as st
from payload_contract import contract_errors
from streamlit.testing.v1 import AppTest

from rollout_core.figures.explorer_payload import ExplorerData, mode

APP = str(Path(__file__).resolve().parents[1] / "app.py")
EXPLORER = "rollout_layer_explorer"


def page(path: str, **query: str) -> AppTest:
    """The app's page `path` run once with `query` as its URL parameters (cached models cleared first)."""
    st.cache_resource.clear()
    at = AppTest.from_file(APP, default_timeout=120)
    for key, value in query.items():
        at.query_params[key] = value
    return at.switch_page(path).run()


def explorers(at: Any) -> list[dict[str, Any]]:
    """The data of every mounted layer explorer, in page order, each checked against the contract (ExplorerData)."""
    found = [json.loads(e.proto.json) for e in at.get("bidi_component") if e.proto.component_name == EXPLORER]
    for data in found:
        assert contract_errors(data, ExplorerData) == [], "the explorer's data breaks its contract"
    return found


def view_at(data: dict[str, Any], layer: int | None = None, raw: bool | None = None) -> dict[str, Any]:
    """One view of an explorer ({"html", "figures", "summary", "marker"}), shared strings put back; default: the
    shown one."""
    payload = data["payload"]
    layer = data["layer"] if layer is None else layer
    return unshare(payload["views"][mode(data["raw"] if raw is None else raw)][layer - 1], payload["shared"])


def unshare(value: Any, shared: list[str]) -> Any:
    """A packed view (rollout_core.figures.layer_views.views_payload) with its {"$shared": i} references put back."""
    if isinstance(value, dict):
        if set(value) == {"$shared"}:
            return shared[value["$shared"]]
        return {k: unshare(v, shared) for k, v in value.items()}
    if isinstance(value, list):
        return [unshare(v, shared) for v in value]
    return value


def shown_html(at: Any) -> str:
    """The st.html bodies and the HTML of each explorer's shown view."""
    return "".join(h.proto.body for h in at.get("html")) + "".join(view_at(d)["html"] for d in explorers(at))


def chart_count(at: Any) -> int:
    """Plotly figures on the page: st.plotly_chart elements and the figures of each explorer's shown view."""
    return len(at.get("plotly_chart")) + sum(len(view_at(d)["figures"]) for d in explorers(at))
