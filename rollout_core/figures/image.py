"""Image views: the patch map over the processed image, and the patch grid alone.

Orientation: map row r is image row band r (top = row 0), column c is the band c from the left; the
y axis runs top-down like the image. Nothing is transposed and the image stays RGB.
"""
from __future__ import annotations

from functools import lru_cache

import numpy as np
import plotly.graph_objects as go

from rollout_core.errors import InputError
from rollout_core.explanation_data import ExplanationData
from rollout_core.figures._common import HOVER_FORMAT, colour_range, row_scores, scale_of, view_title

DEFAULT_COLORMAP = "inferno"
IMAGE_TRACE = "image"
"""Name of the photo trace under an overlay (`image_overlay`)."""
OVERLAY_TRACE = "patches"
"""Name of the overlay's per-patch map trace, the one a viewer's opacity control sets."""


def patch_map(expl: ExplanationData, layer: int | None = None, raw_attention: bool = False) -> np.ndarray:
    """(rows, cols) patch shares of the chosen row (final, after layer index `layer`, or its raw attention)."""
    if expl.grid is None:
        raise InputError("This is not an image explanation: there is no patch grid to draw.")
    return expl.score_map(row_scores(expl, layer, raw_attention))


def image_overlay(
    expl: ExplanationData,
    *,
    layer: int | None = None,
    raw_attention: bool = False,
    opacity: float = 0.5,
    colormap: str = DEFAULT_COLORMAP,
    zmax: float | None = None,
    smooth: bool = False,
) -> go.Figure:
    """The processed image (`ExplanationData.image`) with the patch map stretched over it.

    Each patch value covers its own block of pixels (nearest upsampling), so the hover shows the exact
    patch value with its row and column; `smooth=True` draws a bilinear upsampling instead (hover still
    reads the patch values). `opacity` (0..1) is the map's opacity, `colormap` a Plotly scale name.
    """
    if expl.image is None:
        raise InputError("This explanation carries no image to draw under the map.")
    image = np.asarray(expl.image)
    height, width = image.shape[:2]
    values = patch_map(expl, layer, raw_attention)
    rows, cols = values.shape
    bottom, top = _range(expl, values, zmax)
    dy, dx = height / rows, width / cols
    fig = go.Figure(go.Image(source=png_data_uri(image), hoverinfo="skip", name=IMAGE_TRACE))
    scale = dict(colorscale=scale_of(expl, colormap), zmin=bottom, zmax=top)
    if smooth:
        fig.add_trace(go.Heatmap(z=_bilinear(values, height, width), opacity=float(opacity), hoverinfo="skip",
                                 showscale=False, name="map", **scale))
    fig.add_trace(go.Heatmap(
        z=values, x0=dx / 2 - 0.5, dx=dx, y0=dy / 2 - 0.5, dy=dy, customdata=_rowcol(rows, cols),
        opacity=0.0 if smooth else float(opacity), colorbar=dict(title=_bar_title(expl)), name=OVERLAY_TRACE,
        hovertemplate=f"patch row %{{customdata[0]}}, col %{{customdata[1]}}: %{{z:{HOVER_FORMAT}}}<extra></extra>",
        **scale,
    ))
    _add_sink_marks(fig, expl, dx, dy)
    _image_layout(fig, view_title(expl, layer, raw_attention), width, height)
    return fig


def _add_sink_marks(fig: go.Figure, expl: ExplanationData, dx: float, dy: float) -> None:
    """Crosses on the patches that are attention sinks in some layer (ExplanationData.extras["sinks"])."""
    facts = expl.extras.get("sinks")
    if not facts or expl.patch_positions is None or expl.grid is None:
        return
    layers: dict[int, list[int]] = {}
    for layer, positions in enumerate(facts["positions"]):
        for position in positions:
            layers.setdefault(int(position), []).append(layer + 1)
    index = {int(p): k for k, p in enumerate(expl.patch_positions)}
    marked = [(index[p], found) for p, found in sorted(layers.items()) if p in index]
    if not marked:
        return
    cols = expl.grid[1]
    fig.add_trace(go.Scatter(
        x=[(k % cols + 0.5) * dx - 0.5 for k, _ in marked], y=[(k // cols + 0.5) * dy - 0.5 for k, _ in marked],
        mode="markers", marker=dict(symbol="x-thin", size=14, line=dict(width=3, color="cyan")),
        name="attention sink", showlegend=False, hoverinfo="text",
        hovertext=[f"attention sink (patch row {k // cols}, col {k % cols}) in layer {', '.join(map(str, f))}"
                   for k, f in marked]))


def patch_heatmap(
    expl: ExplanationData,
    *,
    layer: int | None = None,
    raw_attention: bool = False,
    colormap: str = DEFAULT_COLORMAP,
    zmax: float | None = None,
) -> go.Figure:
    """The patch grid alone: z[r][c] = share of patch (row r, col c), row 0 drawn at the top."""
    values = patch_map(expl, layer, raw_attention)
    bottom, top = _range(expl, values, zmax)
    fig = grid_figure(values, title=view_title(expl, layer, raw_attention), colormap=scale_of(expl, colormap),
                      zmin=bottom, zmax=top)
    return fig.update_traces(colorbar=dict(title=_bar_title(expl)))


def _range(expl: ExplanationData, values: np.ndarray, zmax: float | None) -> tuple[float, float]:
    """The colour range of a patch map (`colour_range`), with the top given as `zmax` when asked for."""
    bottom, top = colour_range(values, expl.signed)
    top = top if zmax is None else float(zmax)
    return (-top if expl.signed else bottom), top


def _bar_title(expl: ExplanationData) -> str:
    return "for / against" if expl.signed else "share"


def grid_figure(values: np.ndarray, *, title: str, colormap: str, zmin: float, zmax: float) -> go.Figure:
    """A (rows, cols) map as a heatmap with image orientation (row 0 at the top, square cells)."""
    rows, cols = values.shape
    fig = go.Figure(go.Heatmap(
        z=values, customdata=_rowcol(rows, cols), colorscale=colormap, zmin=zmin, zmax=zmax,
        hovertemplate=f"patch row %{{customdata[0]}}, col %{{customdata[1]}}: %{{z:{HOVER_FORMAT}}}<extra></extra>",
    ))
    fig.update_xaxes(title="patch column", constrain="domain")
    fig.update_yaxes(title="patch row", autorange="reversed", scaleanchor="x", constrain="domain")
    fig.update_layout(title=title, height=420, margin=dict(l=50, r=10, t=40, b=40))
    return fig


def png_data_uri(image: np.ndarray) -> str:
    """(H, W, 3) uint8 RGB as a PNG data URI: lossless, and far lighter for the browser than a pixel array.
    Encodings are remembered (the slider views draw the same image under every layer's map)."""
    pixels = np.ascontiguousarray(image, dtype=np.uint8)[..., :3]
    return _png_data_uri(pixels.tobytes(), pixels.shape)


@lru_cache(maxsize=8)
def _png_data_uri(pixels: bytes, shape: tuple[int, ...]) -> str:
    import base64
    import io

    from PIL import Image

    buffer = io.BytesIO()
    Image.fromarray(np.frombuffer(pixels, np.uint8).reshape(shape), mode="RGB").save(buffer, format="PNG")
    return "data:image/png;base64," + base64.b64encode(buffer.getvalue()).decode("ascii")


def _rowcol(rows: int, cols: int) -> np.ndarray:
    r, c = np.meshgrid(np.arange(rows), np.arange(cols), indexing="ij")
    return np.stack([r, c], axis=-1)


def _bilinear(values: np.ndarray, height: int, width: int) -> np.ndarray:
    from PIL import Image

    return np.asarray(Image.fromarray(values.astype(np.float32), mode="F").resize((width, height), Image.BILINEAR))


def _image_layout(fig: go.Figure, title: str, width: int, height: int) -> None:
    fig.update_xaxes(showticklabels=False, showgrid=False, range=[-0.5, width - 0.5])
    fig.update_yaxes(showticklabels=False, showgrid=False, range=[height - 0.5, -0.5], scaleanchor="x")
    fig.update_layout(title=title, height=440, margin=dict(l=10, r=10, t=40, b=10))
