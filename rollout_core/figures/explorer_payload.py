"""The layer explorer's data contract: what Python sends to layer_explorer.js, as TypedDicts.

Numbers, not drawn views: the parts that stay the same while the slider moves (token texts, the photo, the
figures' layout) are sent once as `panels`; each slider position (`views[mode][layer - 1]`, mode `CUMULATIVE`
or `RAW`) sends only its scores (`series`, rounded floats), their colour-scale tops, titles and summary. The
browser colours (layer_colours.js, the same function as `_common.colours_at`) and draws. The JS builds no keys
of its own: the page's `data-view` markers come with each view and panel (`marker`); the traces a control or a
panel changes are named by index or in the control (`trace`).
"""
from __future__ import annotations

from typing import Any, Final, TypedDict, Union

CUMULATIVE: Final = "cumulative"
"""`views` key of the cumulative maps (the explorer's default mode)."""
RAW: Final = "raw"
"""`views` key of each layer's own attention (the raw-attention toggle)."""
HIGHLIGHT: Final = "highlight"
"""Panel kind: the text with each piece's background coloured by its value."""
BARS: Final = "bars"
"""Panel kind: a Plotly bar chart whose trace `trace` takes the values as heights and colours."""
MAP: Final = "map"
"""Panel kind: a Plotly heatmap whose trace `trace` takes the values as a `rows` x n/rows grid (row-major)."""

Piece = list[Union[int, str]]
"""Highlight text, in reading order: [unit, *runs]. unit >= 0: a token coloured by series value `unit`; -1: plain
text between tokens. Runs alternate text and control-character codes ("\\u202e", drawn as codes, never as the
character): run 0, 2, ... are text, run 1, 3, ... codes."""


class Panel(TypedDict):
    """What a panel keeps while the slider moves. `series` indexes each view's `series` and `tops`. Highlight:
    `pieces`, colours from `Payload.scales[scale]`, `figure` {}. Bars/map: `figure` is Plotly JSON without its
    template, whose trace `trace` takes the values (map: as `rows` rows). `heading`: plain text above ("" none)."""

    kind: str
    series: int
    heading: str
    scale: str
    pieces: list[Piece]
    figure: dict[str, Any]
    trace: int
    rows: int


class PanelView(TypedDict):
    """One panel at one slider position: its title and its `data-view` marker ("" none)."""

    title: str
    marker: str


class ViewData(TypedDict):
    """One slider position: values per series (rounded to `layer_views.DIGITS` significant digits) and their
    colour-scale tops, one PanelView per panel, a plain-text summary, the `data-view` marker of the explorer,
    escaped HTML drawn by the core below the highlights ("" none), whole Plotly figures drawn by the server
    after the panels' (without template; compare's difference) and the slider's reading at this position
    (`position`: "layer 4 of 12", or each side's layer on Compare)."""

    series: list[list[float]]
    tops: list[float]
    bottoms: list[float]  # each series' colour-scale bottom: 0, or -top for signed values (for / against)
    panels: list[PanelView]
    summary: str
    marker: str
    html: str
    figures: list[dict[str, Any]]
    position: str


class ModeViews(TypedDict):
    """Every slider position per mode, index 0 = layer 1."""

    cumulative: list[ViewData]
    raw: list[ViewData]


class Payload(TypedDict):
    """All views of one explanation (`layer_views.*_payload`); `id` is a digest of the rest. `scales`: each colour
    scale the browser applies, as [position, r, g, b] stops (0..1, 0..255)."""

    id: str
    panels: list[Panel]
    views: ModeViews
    template: Any
    scales: dict[str, list[list[float]]]


class ControlSpec(TypedDict):
    """A slider beside the layer slider, setting `attribute` of every trace named `trace` (`TraceControl.spec`)."""

    key: str
    label: str
    trace: str
    attribute: str
    min: float
    max: float
    step: float
    value: float


class UrlKeys(TypedDict):
    """The address-bar names of the slider's settings and the controls' defaults, so the browser updates the
    link at once (each left out at its default, as the server writes them)."""

    layer: str
    raw: str
    defaults: dict[str, float]


class ExplorerData(TypedDict):
    """The explorer's whole `data`: the payload, the number of layers, the starting position, labels, where
    plotly.js comes from ("" = no figures drawn, "inline" = already on the page) and the extra controls.
    `identity` names what the positions mean (models, methods, depths): when it changes the browser takes the
    server's position (a reset to the final map) instead of keeping its own. `url` (the dashboard only): the
    address-bar names the slider writes to (None: the standalone page has none to follow)."""

    payload: Payload
    layers: int
    layer: int
    raw: bool
    label: str
    raw_slider_label: str  # the slider's label while the per-layer view is on (one layer alone, not cumulative)
    raw_label: str
    one_map: bool  # the methods shown give one map of the whole model: the slider moves only the raw view
    plotly_url: str
    controls: list[ControlSpec]
    identity: str
    url: UrlKeys | None


def mode(raw: bool) -> str:
    """The `views` key of a mode."""
    return RAW if raw else CUMULATIVE
