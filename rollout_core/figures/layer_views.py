"""Every position of a layer slider as numbers, so a browser can switch layers (and draw them) without a server.

What a layer slider drives (the text page's highlight and bars, the image page's overlay and patch grid,
the compare page's two sides and their difference) is a function of (layer, raw attention or not). The
`*_payload` functions send what stays fixed once (token texts, the photo, the figures' layout: `panels`) and
per position only its scores, rounded to `DIGITS` significant digits, with their colour-scale tops (one per mode
over every layer with `shared_scale`, else each layer its own), titles and summary: the size grows as
layers x tokens floats, not as drawn HTML and figures. layer_explorer.js colours and draws them.
"""
from __future__ import annotations

import hashlib
import html
import json
import math
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np
import plotly.graph_objects as go

from rollout_core import compare
from rollout_core.explanation_data import ExplanationData
from rollout_core.figures._common import (colour_range, layer_words, method_title, row_scores, scale_of,
                                          scale_stops, view_title)
from rollout_core.figures.comparison import difference_figure
from rollout_core.figures.explorer_payload import (BARS, CUMULATIVE, HIGHLIGHT, MAP, RAW, ControlSpec, Panel,
                                                   PanelView, Payload, ViewData)
from rollout_core.figures.image import DEFAULT_COLORMAP, OVERLAY_TRACE, image_overlay, patch_heatmap
from rollout_core.figures.text import highlight_pieces, score_bar, word_pieces
from rollout_core.summary import summarize

DIGITS = 4
"""Significant digits of the scores sent per slider position (hover and bar heights show these)."""


@dataclass(frozen=True)
class TraceControl:
    """A slider a viewer shows beside the layer slider: it sets `attribute` of every trace named `trace` in
    every view, in the browser (so a display option does not redraw the views either)."""

    key: str
    label: str
    trace: str
    attribute: str
    low: float
    high: float
    step: float

    def spec(self, value: float) -> ControlSpec:
        """JSON-ready description with the current value (clipped to low..high)."""
        return {"key": self.key, "label": self.label, "trace": self.trace, "attribute": self.attribute,
                "min": self.low, "max": self.high, "step": self.step,
                "value": min(self.high, max(self.low, float(value)))}


OVERLAY_OPACITY = TraceControl("opacity", "Overlay opacity", OVERLAY_TRACE, "opacity", 0.0, 1.0, 0.05)
"""The opacity of the map over the image (`image_overlay`'s OVERLAY_TRACE)."""
DEFAULT_OPACITY = 0.55
"""Its starting value on the pages."""


def view_key(layer: int, raw: bool) -> str:
    """Key of slider position `layer` (1-based) in one mode, e.g. "layer-3-cum"; also the views' data-view marker
    (sent with each view as `marker`: the browser never builds it)."""
    return f"layer-{int(layer)}-{'raw' if raw else 'cum'}"


def rounded(values: Any) -> list[float]:
    """`values` (any shape, flattened row-major) to `DIGITS` significant digits, as the payload sends them."""
    return [float(f"{v:.{DIGITS}g}") for v in np.asarray(values, np.float64).ravel().tolist()]


def shown_top(expl: ExplanationData, index: int, raw: bool) -> float:
    """Top of the colour scale for what is shown of `expl` at layer index `index` (`colour_range`)."""
    row = row_scores(expl, index, raw)
    return colour_range(expl.score_map(row) if expl.kind == "image" else expl.display_scores(row), expl.signed)[1]


def scale_tops(*expls: ExplanationData) -> dict[bool, float]:
    """One colour-scale top per mode: the largest shown share over every layer of every explanation."""
    return {raw: max(shown_top(e, i, raw) for e in expls for i in range(e.num_layers)) for raw in (False, True)}


def _tops(expls: tuple[ExplanationData, ...], shared_scale: bool) -> dict[bool, float | None]:
    """Colour-scale tops per mode: one over every layer (`shared_scale`), or None = each layer its own maximum."""
    return scale_tops(*expls) if shared_scale else {False: None, True: None}


def side_layer(position: int, positions: int, layers: int) -> int:
    """The layer index a side of `layers` layers shows at slider index `position` of `positions` (relative
    depth: the same fraction of its own depth, rounded up, so the last position is every side's last layer)."""
    return max(0, math.ceil((position + 1) * layers / positions) - 1)


class _Figures:
    """Plotly figures as JSON without their template (kept once, in `template`)."""

    def __init__(self) -> None:
        self.template: Any = None

    def __call__(self, fig: go.Figure) -> dict[str, Any]:
        spec = json.loads(fig.to_json())
        self.template = spec.get("layout", {}).pop("template", self.template)
        return spec


def _highlight(series: int, heading: str, expl: ExplanationData) -> Panel:
    return {"kind": HIGHLIGHT, "series": series, "heading": heading, "scale": scale_of(expl),
            "pieces": highlight_pieces(expl), "figure": {}, "trace": 0, "rows": 0}


def _bars(series: int, spec: dict[str, Any]) -> Panel:
    """A bar chart whose heights and colours come from each view (the base's own are left out)."""
    spec["data"][0]["y"], spec["data"][0]["marker"]["color"] = [], []
    return {"kind": BARS, "series": series, "heading": "", "scale": "", "pieces": [], "figure": spec,
            "trace": 0, "rows": 0}


def _map(series: int, spec: dict[str, Any], rows: int, trace_name: str | None = None) -> Panel:
    """A heatmap (trace `trace_name`, default the first) whose grid comes from each view."""
    trace = next((i for i, t in enumerate(spec["data"]) if t.get("name") == trace_name), 0)
    spec["data"][trace]["z"] = []
    return {"kind": MAP, "series": series, "heading": "", "scale": "", "pieces": [], "figure": spec,
            "trace": trace, "rows": rows}


def _view(series: list[np.ndarray], tops: list[float | None], panels: list[tuple[str, str]], summary: str,
          marker: str, position: str, html_text: str = "", figures: list[dict[str, Any]] | None = None,
          signed: list[bool] | None = None) -> ViewData:
    """One slider position; a top of None is the series' own (`colour_range`); a `signed` series' scale runs
    from -top to top, the others' from 0."""
    views: list[PanelView] = [{"title": title, "marker": mark} for title, mark in panels]
    signed = signed or [False] * len(series)
    tops_ = [colour_range(s, sign)[1] if top is None else float(top) for s, top, sign in zip(series, tops, signed)]
    return {"series": [rounded(s) for s in series], "tops": tops_,
            "bottoms": [-top if sign else 0.0 for top, sign in zip(tops_, signed)],
            "panels": views, "summary": summary, "marker": marker, "html": html_text, "figures": figures or [],
            "position": position}


def _payload(panels: list[Panel], layers: int, draw: Callable[[int, bool, str], ViewData], template: Any
             ) -> Payload:
    """Every position of both modes, the colour scales the highlights use, and a digest of it all as `id`."""
    views = {mode: [draw(i, raw, view_key(i + 1, raw)) for i in range(layers)]
             for mode, raw in ((CUMULATIVE, False), (RAW, True))}
    scales = {p["scale"]: scale_stops(p["scale"]) for p in panels if p["kind"] == HIGHLIGHT}
    body = {"panels": panels, "views": views, "template": template, "scales": scales}
    digest = hashlib.sha256(json.dumps(body, sort_keys=True).encode("utf-8")).hexdigest()[:16]
    return {"id": digest, "panels": panels, "views": {CUMULATIVE: views[CUMULATIVE], RAW: views[RAW]},
            "template": template, "scales": scales}


def text_payload(expl: ExplanationData, *, shared_scale: bool = False, figures: bool = True, level: str = "word"
                 ) -> Payload:
    """Highlight, bar chart (unless not `figures`) and summary of a text explanation at every slider position;
    each layer on its own colour scale (0 to its largest share) unless `shared_scale` puts every layer of a
    mode on one. Both panels draw the same series: per word of the text (`level` "word", the default: a word's
    pieces summed, as the summary names them) or per token ("token", or a text without offsets)."""
    words = level == "word" and expl.text is not None and expl.offsets is not None

    def values(index: int, raw: bool) -> np.ndarray:
        row = row_scores(expl, index, raw)
        return np.array([v for *_, v in compare.word_scores(expl, row)]) if words else expl.display_scores(row)

    tops = ({raw: max(colour_range(values(i, raw), expl.signed)[1] for i in range(expl.num_layers))
             for raw in (False, True)} if shared_scale else {False: None, True: None})
    plot = _Figures()
    highlight = _highlight(0, "", expl)
    if words:
        highlight["pieces"] = word_pieces(expl.text)
    bars = score_bar(expl, layer=0, level="word" if words else "token")
    panels = [highlight] + ([_bars(0, plot(bars))] if figures else [])

    def draw(index: int, raw: bool, key: str) -> ViewData:
        title = view_title(expl, index, raw)
        return _view([values(index, raw)], [tops[raw]],
                     [(title, key), (title, "")][:len(panels)], summarize(expl, layer=index, raw_attention=raw), key,
                     layer_words(expl, index), signed=[expl.signed])

    return _payload(panels, expl.num_layers, draw, plot.template)


def image_payload(expl: ExplanationData, *, colormap: str = DEFAULT_COLORMAP, shared_scale: bool = False,
                  figures: bool = True, opacity: float = 0.5) -> Payload:
    """Overlay, patch grid (unless not `figures`) and summary of an image explanation at every slider position;
    each layer on its own colour scale unless `shared_scale` (as in text_payload)."""
    tops = _tops((expl,), shared_scale)
    plot = _Figures()
    rows = expl.grid[0] if expl.grid else 0
    panels = [_map(0, plot(image_overlay(expl, layer=0, colormap=colormap, opacity=opacity)), rows, OVERLAY_TRACE),
              _map(0, plot(patch_heatmap(expl, layer=0, colormap=colormap)), rows)] if figures else []

    def draw(index: int, raw: bool, key: str) -> ViewData:
        title = view_title(expl, index, raw)
        return _view([expl.score_map(row_scores(expl, index, raw))], [tops[raw]], [(title, "")] * len(panels),
                     summarize(expl, layer=index, raw_attention=raw), key, layer_words(expl, index),
                     f'<div class="image-view" data-view="{html.escape(key, quote=True)}"></div>', signed=[expl.signed])

    return _payload(panels, expl.num_layers, draw, plot.template)


SIDE_SCALES = ("shared", "each")
"""Compare's colour scales: both sides on one scale, or each side on its own (a faint side stays visible)."""


def _side_tops(a: ExplanationData, b: ExplanationData, sides: str, shared_scale: bool
               ) -> Callable[[int, int, bool], tuple[float | None, float | None]]:
    """(top of A, top of B) at (A's layer index, B's layer index, raw): one over both sides or each its own
    (`sides`), per position or over every layer (`shared_scale`); None = that figure's own largest value."""
    if sides not in SIDE_SCALES:
        raise ValueError(f"sides must be one of {SIDE_SCALES}, not {sides!r}")
    if sides == "shared":
        if shared_scale:
            tops = scale_tops(a, b)
            return lambda ia, ib, raw: (tops[raw], tops[raw])
        return lambda ia, ib, raw: (max(shown_top(a, ia, raw), shown_top(b, ib, raw)),) * 2
    if shared_scale:
        top_a, top_b = scale_tops(a), scale_tops(b)
        return lambda ia, ib, raw: (top_a[raw], top_b[raw])
    return lambda ia, ib, raw: (None, None)


def comparison_payload(a: ExplanationData, b: ExplanationData, *, sides: str = "shared", shared_scale: bool = False,
                       colormap: str = DEFAULT_COLORMAP, opacity: float = 0.5) -> Payload:
    """Both sides, their agreement and difference at every slider position. The slider covers the deeper
    side's layers and each side follows at its own relative depth (`side_layer`): the last position is both
    final maps, whatever their depths. Colour scales: `sides` "shared" (one for both) or "each", per position
    unless `shared_scale` (one over every layer). Text: the two highlights; images: each side's map over its
    photo, titled with its model and method. The difference figure is drawn here, per position."""
    positions = max(a.num_layers, b.num_layers)
    tops = _side_tops(a, b, sides, shared_scale)
    header = {"A": f"A: {a.model_name}, {method_title(a.method)}", "B": f"B: {b.model_name}, {method_title(b.method)}"}
    plot = _Figures()
    sides_ = (("A", a), ("B", b))
    if a.kind == "text":
        panels = [_highlight(i, header[name], expl) for i, (name, expl) in enumerate(sides_)]
    else:
        panels = [_map(i, plot(image_overlay(expl, layer=0, opacity=opacity, colormap=colormap)), expl.grid[0],
                       OVERLAY_TRACE) for i, (_, expl) in enumerate(sides_)]

    def shown(expl: ExplanationData, index: int, raw: bool) -> np.ndarray:
        row = row_scores(expl, index, raw)
        return expl.display_scores(row) if expl.kind == "text" else expl.score_map(row)

    def title(name: str, expl: ExplanationData, index: int, raw: bool, key: str) -> tuple[str, str]:
        if expl.kind == "text":
            return view_title(expl, index, raw), f"{name}-{key}"
        # the title names the method
        return html.escape(f"{name}: {expl.model_name} · {view_title(expl, index, raw)}"), ""

    def draw(position: int, raw: bool, key: str) -> ViewData:
        ia, ib = (side_layer(position, positions, e.num_layers) for e in (a, b))
        result = compare.compare(a, b, scores_a=row_scores(a, ia, raw), scores_b=row_scores(b, ib, raw))
        spearman = "n/a" if math.isnan(result.spearman) else f"{result.spearman:.3f}"
        agreement = (f'<p class="agreement" data-view="{key}"><b>Spearman rank correlation</b> {spearman} · '
                     f'<b>top-{result.k} overlap</b> {result.top_k_overlap:.0%} · '
                     f'<b>units compared</b> {len(result.units)}</p>')
        summaries = (f"A: {summarize(a, layer=ia, raw_attention=raw)}\n\n"
                     f"B: {summarize(b, layer=ib, raw_attention=raw)}")
        difference = plot(difference_figure(a, b, layer=ia, raw_attention=raw, comparison=result))
        words = layer_words(a, ia), layer_words(b, ib)
        reading = words[0] if words[0] == words[1] else f"A {words[0]} · B {words[1]}"
        return _view([shown(a, ia, raw), shown(b, ib, raw)], list(tops(ia, ib, raw)),
                     [title(name, expl, i, raw, key) for (name, expl), i in zip(sides_, (ia, ib))], summaries, key,
                     reading, agreement, [difference], signed=[a.signed, b.signed])

    return _payload(panels, positions, draw, plot.template)
