"""Every position of a layer slider, drawn ahead of time, so a browser can switch layers without a server.

What a layer slider drives (the text page's highlight and bars, the image page's overlay and patch grid,
the compare page's two sides and their difference) is a function of (layer, raw attention or not).
`layer_views` draws it for every layer in both modes, on one colour scale per mode so colours stay
comparable while the slider moves; `views_payload` packs the views into one JSON-ready dict for a viewer
that only swaps what is shown: Plotly figures as plain JSON with their shared template stored once, and
long strings repeated across views (an image's PNG) stored once.
"""
from __future__ import annotations

import hashlib
import html
import json
import math
from dataclasses import dataclass
from typing import Any, Callable

import plotly.graph_objects as go

from rollout_core import compare
from rollout_core.explanation import Explanation
from rollout_core.figures._common import row_scores, view_title
from rollout_core.figures.comparison import difference_figure, shared_zmax
from rollout_core.figures.explorer_payload import CUMULATIVE, RAW, ControlSpec, ModeViews, Payload, ViewData
from rollout_core.figures.image import DEFAULT_COLORMAP, OVERLAY_TRACE, image_overlay, patch_heatmap
from rollout_core.figures.text import score_bar, token_highlight_html
from rollout_core.summary import summarize

SHARED_MIN_CHARS = 1024
"""Strings at least this long that occur in more than one view are sent once (`views_payload`)."""


@dataclass(frozen=True)
class LayerView:
    """What one slider position shows: escaped HTML (from the core's builders), figures, a plain-text summary."""

    html: str = ""
    figures: tuple[go.Figure, ...] = ()
    summary: str = ""


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


def layer_views(num_layers: int, draw: Callable[[int, bool, str], LayerView]) -> dict[str, LayerView]:
    """`draw(layer_index, raw, key)` for every layer (index 0 = slider position 1) in both modes."""
    return {view_key(i + 1, raw): draw(i, raw, view_key(i + 1, raw)) for raw in (False, True) for i in range(num_layers)}


def scale_tops(*expls: Explanation, num_layers: int | None = None) -> dict[bool, float]:
    """One colour-scale top per mode: the largest shown share over every layer of every explanation."""
    layers = num_layers if num_layers is not None else min(e.num_layers for e in expls)
    return {raw: max(shared_zmax(*expls, layer=i, raw_attention=raw) for i in range(layers)) for raw in (False, True)}


def _tops(expls: tuple[Explanation, ...], shared_scale: bool) -> dict[bool, float | None]:
    """Colour-scale tops per mode: one over every layer (`shared_scale`), or None = each layer its own maximum."""
    return scale_tops(*expls) if shared_scale else {False: None, True: None}


def text_views(expl: Explanation, *, shared_scale: bool = False) -> dict[str, LayerView]:
    """Highlight, bar chart and summary of a text explanation at every slider position; each layer on its own
    colour scale (0 to its largest share) unless `shared_scale` puts every layer of a mode on one."""
    tops = _tops((expl,), shared_scale)

    def draw(index: int, raw: bool, key: str) -> LayerView:
        view = dict(layer=index, raw_attention=raw, zmax=tops[raw])
        return LayerView(html=token_highlight_html(expl, marker=key, **view), figures=(score_bar(expl, **view),),
                         summary=summarize(expl, layer=index, raw_attention=raw))

    return layer_views(expl.num_layers, draw)


def image_views(expl: Explanation, *, opacity: float = 0.5, colormap: str = DEFAULT_COLORMAP,
                shared_scale: bool = False) -> dict[str, LayerView]:
    """Overlay, patch grid and summary of an image explanation at every slider position; each layer on its own
    colour scale unless `shared_scale` (as in text_views)."""
    tops = _tops((expl,), shared_scale)

    def draw(index: int, raw: bool, key: str) -> LayerView:
        view = dict(layer=index, raw_attention=raw, zmax=tops[raw], colormap=colormap)
        return LayerView(html=f'<div class="image-view" data-view="{key}"></div>',
                         figures=(image_overlay(expl, opacity=opacity, **view), patch_heatmap(expl, **view)),
                         summary=summarize(expl, layer=index, raw_attention=raw))

    return layer_views(expl.num_layers, draw)


SIDE_SCALES = ("shared", "each")
"""Compare's colour scales: both sides on one scale, or each side on its own (a faint side stays visible)."""


def _side_tops(a: Explanation, b: Explanation, layers: int, sides: str, shared_scale: bool
               ) -> Callable[[int, bool], tuple[float | None, float | None]]:
    """(top of A, top of B) at (layer index, raw): one over both sides or each its own (`sides`), per layer or
    over every layer (`shared_scale`); None = that figure's own largest value."""
    if sides not in SIDE_SCALES:
        raise ValueError(f"sides must be one of {SIDE_SCALES}, not {sides!r}")
    if sides == "shared":
        if shared_scale:
            tops = scale_tops(a, b, num_layers=layers)
            return lambda index, raw: (tops[raw], tops[raw])
        return lambda index, raw: (shared_zmax(a, b, layer=index, raw_attention=raw),) * 2
    if shared_scale:
        top_a, top_b = scale_tops(a, num_layers=layers), scale_tops(b, num_layers=layers)
        return lambda index, raw: (top_a[raw], top_b[raw])
    return lambda index, raw: (None, None)


def comparison_views(a: Explanation, b: Explanation, *, sides: str = "shared", shared_scale: bool = False,
                     colormap: str = DEFAULT_COLORMAP, opacity: float = 0.5) -> dict[str, LayerView]:
    """Both sides, their agreement and difference at every slider position up to the shorter model's depth
    (each side shows its own layer of that number). Colour scales: `sides` "shared" (one for both) or "each",
    per layer unless `shared_scale` (one over every layer). Images: each side's map over its photo, titled
    with its model and method."""
    layers = min(a.num_layers, b.num_layers)
    tops = _side_tops(a, b, layers, sides, shared_scale)
    header = {"A": f"A: {a.model_name}, {a.method}", "B": f"B: {b.model_name}, {b.method}"}

    def side(expl: Explanation, name: str, index: int, raw: bool, key: str, top: float | None
             ) -> tuple[str, tuple[go.Figure, ...]]:
        view = dict(layer=index, raw_attention=raw, zmax=top)
        if expl.kind == "text":
            return token_highlight_html(expl, marker=f"{name}-{key}", **view), ()
        fig = image_overlay(expl, opacity=opacity, colormap=colormap, **view)
        fig.update_layout(title=html.escape(f"{header[name]} · {view_title(expl, index, raw)}"))
        return "", (fig,)

    def draw(index: int, raw: bool, key: str) -> LayerView:
        result = compare.compare(a, b, scores_a=row_scores(a, index, raw),
                                 scores_b=row_scores(b, index, raw))
        top_a, top_b = tops(index, raw)
        (html_a, figs_a), (html_b, figs_b) = side(a, "A", index, raw, key, top_a), side(b, "B", index, raw, key, top_b)
        spearman = "n/a" if math.isnan(result.spearman) else f"{result.spearman:.3f}"
        agreement = (f'<p class="agreement" data-view="{key}"><b>Spearman rank correlation</b> {spearman} · '
                     f'<b>top-{result.k} overlap</b> {result.top_k_overlap:.0%} · '
                     f'<b>units compared</b> {len(result.units)}</p>')
        columns = ""
        if a.kind == "text":
            columns = "".join(f'<div style="flex:1;min-width:0"><p><b>{html.escape(header[name])}</b></p>{body}</div>'
                              for name, body in (("A", html_a), ("B", html_b)))
            columns = f'<div style="display:flex;gap:1.5em">{columns}</div>'
        summaries = (f"A: {summarize(a, layer=index, raw_attention=raw)}\n\n"
                     f"B: {summarize(b, layer=index, raw_attention=raw)}")
        return LayerView(html=f"{columns}{agreement}",
                         figures=figs_a + figs_b + (difference_figure(a, b, layer=index, raw_attention=raw,
                                                                      comparison=result),),
                         summary=summaries)

    return layer_views(layers, draw)


def views_payload(views: dict[str, LayerView]) -> Payload:
    """The views (all of `layer_views`) as the explorer's `Payload`: {"id", "views": {mode: [view per layer]},
    "template", "shared"}, each view {"html", "figures", "summary", "marker"}. Figures are Plotly JSON without
    their template (one "template" for all); any string of at least `SHARED_MIN_CHARS` characters found in more
    than one view is replaced by {"$shared": i} into "shared". "id" is a digest of the content, so a viewer can
    tell a new explanation from a repeated one."""
    layers = len(views) // 2
    expected = {view_key(k, raw) for k in range(1, layers + 1) for raw in (False, True)}
    if set(views) != expected:
        raise ValueError(f"views must hold every layer in both modes ({sorted(expected)}), not {sorted(views)}")
    template: Any = None
    packed: list[ViewData] = []  # cumulative layers 1..n, then raw layers 1..n
    for raw in (False, True):
        for k in range(1, layers + 1):
            view = views[view_key(k, raw)]
            figures = []
            for fig in view.figures:
                spec = json.loads(fig.to_json())
                template = spec.get("layout", {}).pop("template", template)
                figures.append(spec)
            packed.append({"html": view.html, "figures": figures, "summary": view.summary,
                           "marker": view_key(k, raw)})
    shared: list[str] = []
    packed = _share_strings(packed, shared)
    by_mode: ModeViews = {CUMULATIVE: packed[:layers], RAW: packed[layers:]}
    body = {"views": by_mode, "template": template, "shared": shared}
    digest = hashlib.sha256(json.dumps(body, sort_keys=True).encode("utf-8")).hexdigest()[:16]
    return {"id": digest, "views": by_mode, "template": template, "shared": shared}


def _share_strings(packed: list[ViewData], shared: list[str]) -> list[ViewData]:
    """Replace long strings occurring in two or more views by references into `shared` (filled here)."""
    seen: dict[str, set[int]] = {}

    def collect(value: Any, owner: int) -> None:
        if isinstance(value, str) and len(value) >= SHARED_MIN_CHARS:
            seen.setdefault(value, set()).add(owner)
        elif isinstance(value, dict):
            for item in value.values():
                collect(item, owner)
        elif isinstance(value, list):
            for item in value:
                collect(item, owner)

    for owner, view in enumerate(packed):
        collect(view, owner)
    index = {text: i for i, text in enumerate(t for t, owners in seen.items() if len(owners) > 1)}
    shared.extend(index)

    def replace(value: Any) -> Any:
        if isinstance(value, str) and value in index:
            return {"$shared": index[value]}
        if isinstance(value, dict):
            return {k: replace(v) for k, v in value.items()}
        if isinstance(value, list):
            return [replace(v) for v in value]
        return value

    return [replace(view) for view in packed]
