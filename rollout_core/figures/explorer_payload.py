"""The layer explorer's data contract: what Python sends to layer_explorer.js, as TypedDicts.

The JS reads exactly these keys and builds none of its own: a view is `views[mode][layer - 1]` with mode
`CUMULATIVE` or `RAW`; the page's `data-view` markers come with each view (`marker`); the traces a control
changes are named in the control (`trace`, from the figure modules' trace-name constants).
"""
from __future__ import annotations

from typing import Any, Final, TypedDict, Union

CUMULATIVE: Final = "cumulative"
"""`views` key of the cumulative maps (the explorer's default mode)."""
RAW: Final = "raw"
"""`views` key of each layer's own attention (the raw-attention toggle)."""

SharedRef = TypedDict("SharedRef", {"$shared": int})
"""A long string repeated across views, sent once: index into `Payload.shared`."""


class ViewData(TypedDict):
    """One slider position: escaped HTML, Plotly figures without their template, a plain-text summary, and the
    marker the page puts in the explorer's `data-view` (the same as in the view's own HTML)."""

    html: Union[str, SharedRef]
    figures: list[dict[str, Any]]
    summary: Union[str, SharedRef]
    marker: str


class ModeViews(TypedDict):
    """Every slider position per mode, index 0 = layer 1."""

    cumulative: list[ViewData]
    raw: list[ViewData]


class Payload(TypedDict):
    """All views of one explanation (`layer_views.views_payload`); `id` is a digest of the rest."""

    id: str
    views: ModeViews
    template: Any
    shared: list[str]


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


class ExplorerData(TypedDict):
    """The explorer's whole `data`: the payload, the number of layers, the starting position, labels, where
    plotly.js comes from ("" = no figures drawn, "inline" = already on the page) and the extra controls."""

    payload: Payload
    layers: int
    layer: int
    raw: bool
    label: str
    raw_label: str
    plotly_url: str
    controls: list[ControlSpec]


def mode(raw: bool) -> str:
    """The `views` key of a mode."""
    return RAW if raw else CUMULATIVE
