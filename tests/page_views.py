"""What a page shows under AppTest, including the layer explorer, whose views are switched in the browser.

The explorer (app_pages/_lib/layer_explorer.py) sends every slider position at once, as numbers; the browser draws
the one at the data's (layer, raw). These helpers draw that view from the element's data as the JS does, so AppTest
tests can check what a user sees first (the interaction itself is tested in tests/browser).
"""
from __future__ import annotations

import copy
import html
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
    """One view of an explorer as the browser draws it ({"html", "figures", "summary", "marker"}; the HTML without
    colours or styles, user text escaped); default: the shown one."""
    payload = data["payload"]
    layer = data["layer"] if layer is None else layer
    view = payload["views"][mode(data["raw"] if raw is None else raw)][layer - 1]
    parts, figures = [], []
    for panel, shown in zip(payload["panels"], view["panels"]):
        values, top = view["series"][panel["series"]], view["tops"][panel["series"]]
        bottom = view["bottoms"][panel["series"]]
        if panel["kind"] == "highlight":
            parts.append(_highlight(panel, values, shown, bottom))
        else:
            figures.append(_figure(panel, values, bottom, top, shown["title"]))
    return {"html": "".join(parts) + view["html"], "figures": figures + view["figures"],
            "summary": view["summary"], "marker": view["marker"]}


def _highlight(panel: dict[str, Any], values: list[float], shown: dict[str, str], bottom: float = 0.0) -> str:
    body = []
    for unit, *runs in panel["pieces"]:
        text = "".join(html.escape(run) if k % 2 == 0 else f'<span class="ctrl-char">{html.escape(run)}</span>'
                       for k, run in enumerate(runs))
        body.append(text if unit < 0 else f'<span class="tok" data-score="{values[unit]}">{text}</span>')
    heading = f"<p><b>{html.escape(panel['heading'])}</b></p>" if panel["heading"] else ""
    return (f'{heading}<div class="token-highlight" data-view="{html.escape(shown["marker"])}">{"".join(body)}</div>'
            f'<div class="token-legend">{html.escape(shown["title"])}: '
            f'{"signed share: for (+) / against (−)" if bottom < 0 else "share of the shown mass"}</div>')


def _figure(panel: dict[str, Any], values: list[float], bottom: float, top: float, title: str) -> dict[str, Any]:
    figure = copy.deepcopy(panel["figure"])
    trace = figure["data"][panel["trace"]]
    if panel["kind"] == "bars":
        trace["y"], trace["marker"]["color"] = values, values
        trace["marker"]["cmin"], trace["marker"]["cmax"] = bottom, top
        figure["layout"]["yaxis"]["range"] = [bottom * 1.05, top * 1.05]
    else:
        cols = len(values) // panel["rows"]
        trace["z"] = [values[r * cols:(r + 1) * cols] for r in range(panel["rows"])]
        trace["zmin"], trace["zmax"] = bottom, top
    figure["layout"]["title"] = {**figure["layout"].get("title", {}), "text": title}
    return figure


def shown_html(at: Any) -> str:
    """The st.html bodies and the HTML of each explorer's shown view."""
    return "".join(h.proto.body for h in at.get("html")) + "".join(view_at(d)["html"] for d in explorers(at))


def chart_count(at: Any) -> int:
    """Plotly figures on the page: st.plotly_chart elements and the figures of each explorer's shown view."""
    return len(at.get("plotly_chart")) + sum(len(view_at(d)["figures"]) for d in explorers(at))
