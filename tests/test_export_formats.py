"""SVG and PDF export through kaleido, the highlight as plain SVG, and the standalone / notebook HTML."""
from __future__ import annotations

import html
import json
import re
import time
import xml.etree.ElementTree as ET

import numpy as np
import plotly.graph_objects as go
import pytest

from explanations import make_explanation
import rollout_core as rc
from rollout_core import figures as F
from rollout_core.errors import RolloutError
from rollout_core.explanation import Explanation, Prediction
from rollout_core.figures import export, standalone

SVG = "{http://www.w3.org/2000/svg}"
HOSTILE = ["[CLS]", "<script>", "a&b", "\u202etxt", "[SEP]"]


def _expl(tokens=HOSTILE, scores=(0.1, 0.1, 0.6, 0.2, 0.0)) -> Explanation:
    n = len(tokens)
    scores = np.asarray(scores, dtype=np.float64)
    attn = np.full((2, n, n), 1.0 / n)
    return make_explanation(
        tokens, scores, model_name="hand <m>", special=np.array([t in ("[CLS]", "[SEP]") for t in tokens]),
        layer_scores=np.stack([scores[::-1], scores]), layer_attention_scores=attn[:, 0], matrix=attn[1],
        layer_attention=attn, prediction=[Prediction("NEG<ATIVE>", 0.9, 0)],
    )


@pytest.mark.slow
def test_svg_export_is_vector_with_one_drawn_bar_per_value_and_pdf_is_a_pdf():
    fig = go.Figure(go.Bar(y=[1.0, 3.0, 2.0]))
    root = ET.fromstring(F.figure_svg(fig, width=400, height=300))
    assert root.tag == f"{SVG}svg" and root.get("width") == "400" and root.get("height") == "300"
    bars = [g for g in root.iter(f"{SVG}g") if "point" in (g.get("class") or "").split()]
    assert len(bars) == 3
    assert not list(root.iter(f"{SVG}image")), "a vector export must not embed a raster"
    pdf = F.figure_pdf(fig, width=400, height=300)
    assert pdf.startswith(b"%PDF-") and b"%%EOF" in pdf[-64:]


def test_vector_export_that_never_answers_fails_clearly_in_bounded_time(monkeypatch):
    import kaleido

    monkeypatch.setattr(export, "KALEIDO_TIMEOUT_S", 0.5)
    monkeypatch.setattr(kaleido, "calc_fig_sync", lambda *a, **k: time.sleep(3))
    start = time.monotonic()
    with pytest.raises(RolloutError, match="SVG export needs kaleido"):
        F.figure_svg(go.Figure(go.Bar(y=[1.0])))
    assert time.monotonic() - start < 2.5


def test_highlight_svg_is_plain_text_elements_escaped_in_order_and_coloured_by_share():
    expl = _expl()
    markup = F.token_highlight_svg(expl, layer=1)
    assert "<script>" not in markup and "foreignObject" not in markup and "\u202e" not in markup
    root = ET.fromstring(markup)
    groups = [g for g in root.iter(f"{SVG}g") if g.get("class") == "tok"]
    assert [g.find(f"{SVG}text").text for g in groups] == ["<script>", "a&b", "\\u202etxt"]  # specials left out
    fills = [g.find(f"{SVG}rect").get("fill") for g in groups]
    assert fills[1] == "#800026"  # the largest share (0.6 of 0.9) gets the top of YlOrRd, rgb(128,0,38)
    shares = [float(g.find(f"{SVG}rect").find(f"{SVG}title").text.rsplit(": ", 1)[1]) for g in groups]
    assert np.allclose(shares, np.array([0.1, 0.6, 0.2]) / 0.9, atol=1e-6)
    assert "rollout up to layer 2" in root.findall(f"{SVG}text")[-1].text


def test_highlight_svg_wraps_lines_within_the_width():
    tokens = ["[CLS]"] + ["wordwordword"] * 12 + ["[SEP]"]
    root = ET.fromstring(F.token_highlight_svg(_expl(tokens, np.full(14, 1 / 14)), width=300))
    rects = [g.find(f"{SVG}rect") for g in root.iter(f"{SVG}g") if g.get("class") == "tok"]
    assert len({r.get("y") for r in rects}) > 1
    assert all(float(r.get("x")) + float(r.get("width")) <= 300 for r in rects)


def _data(page: str) -> dict:
    body = re.search(r'<script type="application/json" id="explorer-data">(.*?)</script>', page, re.S).group(1)
    return json.loads(body)


def test_standalone_page_is_self_contained_escaped_and_starts_at_the_asked_view(tmp_path):
    expl = _expl()
    page = expl.to_html(tmp_path / "v.html", layer=0, raw_attention=True)
    assert (tmp_path / "v.html").read_text(encoding="utf-8") == page
    scripts = re.findall(r"<script(?: [^>]*)?>", page)
    assert len(scripts) == 4  # plotly.js, the data, the explorer, its start: nothing loaded from elsewhere
    assert "src=" not in "".join(scripts) and "<link" not in page
    assert "<title>rollout · hand &lt;m&gt;</title>" in page and "NEG&lt;ATIVE&gt;" in page
    data = _data(page)
    assert data["layer"] == 1 and data["raw"] is True and data["layers"] == 2
    views = data["payload"]["views"]
    assert [[v["marker"] for v in views[m]] for m in ("cumulative", "raw")] == [["layer-1-cum", "layer-2-cum"],
                                                                                ["layer-1-raw", "layer-2-raw"]]
    # token texts travel as text (the explorer puts them in as text nodes), control characters written as codes,
    # and no "<" of theirs reaches the page's HTML: the data cannot close its script element
    (highlight,) = [p for p in data["payload"]["panels"] if p["kind"] == "highlight"]
    assert highlight["pieces"] == [[0, "<script>"], [-1, " "], [1, "a&b"], [-1, " "], [2, "\\u202etxt"]]
    assert page.count("<script>") == 3 and "\\u003cscript>" in page and "\u202e" not in page


def test_notebook_repr_is_an_iframe_of_the_page_text_without_plotly():
    expl = _expl()
    markup = expl._repr_html_()
    assert markup.startswith('<iframe class="rollout-explorer" srcdoc="')
    srcdoc = html.unescape(re.search(r'srcdoc="([^"]*)"', markup).group(1))
    assert srcdoc.startswith("<!DOCTYPE html>") and "window.rolloutLayerExplorer" in srcdoc
    assert _data(srcdoc)["payload"]["views"]["cumulative"][0]["figures"] == []
    assert len(markup) < 200_000  # text in a notebook: no 4.8 MB of plotly.js per output


def test_show_writes_the_page_and_returns_its_path(tmp_path):
    path = rc.show(_expl(), tmp_path / "s.html", open_browser=False)
    assert path == tmp_path / "s.html" and "rolloutLayerExplorer" in path.read_text(encoding="utf-8")


def test_explorer_script_keeps_the_export_the_standalone_page_rewrites():
    assert standalone.explorer_asset("js").count("export default function (component)") == 1


def test_standalone_page_refuses_a_layer_outside_the_explanation():
    from rollout_core.errors import InputError

    with pytest.raises(InputError, match="outside 0..1"):
        _expl().to_html(layer=2)
