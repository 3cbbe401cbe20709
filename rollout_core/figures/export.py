"""Downloads: figures as PNG (with a raster fallback), SVG and PDF (vector, for papers), scores as CSV and JSON."""
from __future__ import annotations

import concurrent.futures
import io
import json
import logging
import os
import shutil

import numpy as np
import plotly.graph_objects as go
from plotly.colors import sample_colorscale

from rollout_core.errors import RolloutError
from rollout_core.explanation_data import ExplanationData
from rollout_core.extras import MissingExtraError, require

_log = logging.getLogger(__name__)
_FALLBACK_SIDE = 480  # longer side, in pixels, of a fallback heatmap without an image under it
DEFAULT_WIDTH = 900
"""Export width of a figure that is not image-like (`natural_width`) when none is asked for."""


def figure_png(fig: go.Figure, *, width: int | None = None, height: int | None = None, scale: float = 2.0,
               fallback: bool = True) -> bytes:
    """The figure as PNG bytes, `width` (default: an image-like figure's `natural_width`, else DEFAULT_WIDTH)
    by `height` (default: the figure's) layout pixels, times `scale`.

    First Plotly's own export (kaleido v1, which drives a headless Chrome; the browser is taken from
    `BROWSER_PATH`, else `chromium` on PATH, e.g. Debian's /usr/bin/chromium). If kaleido cannot run and
    `fallback` is true, a plain raster is built with numpy and PIL instead. The fallback draws ONLY the
    data of the figure's Image and Heatmap traces (image first, heatmaps over it with their opacity and
    colour scale, grey special cells included, row 0 at the top as on screen), one pixel block per cell,
    or the bars of a vertical Bar trace in their marker colours: no title, axes, tick labels, colour bar
    or other trace types. A figure with none of these (curves) raises a RolloutError when kaleido is
    unavailable.
    """
    height = height or int(fig.layout.height or 500)
    width = width or natural_width(fig, height) or DEFAULT_WIDTH
    try:
        return _kaleido(fig, "png", width, height, scale)
    except Exception as err:  # kaleido/Chrome missing or failing: any error here means "cannot export"
        if not fallback and isinstance(err, MissingExtraError):
            raise
        if not fallback:
            raise RolloutError(f"PNG export needs kaleido and Chrome/Chromium, which failed: {err}") from err
        _log.warning("kaleido export failed (%s); drawing the numpy fallback", err)
    return raster_png(fig)


def figure_svg(fig: go.Figure, *, width: int | None = None, height: int | None = None) -> bytes:
    """The figure as SVG bytes (kaleido; no fallback: a vector file cannot be made without it)."""
    return _vector(fig, "svg", width, height)


def figure_pdf(fig: go.Figure, *, width: int | None = None, height: int | None = None) -> bytes:
    """The figure as PDF bytes (kaleido; no fallback)."""
    return _vector(fig, "pdf", width, height)


def natural_width(fig: go.Figure, height: int) -> int | None:
    """The width at which an image-like figure (y axis scale-anchored to x: overlays, patch grids) fills its
    plot area at `height` pixels, so an export has no empty bands beside the image: the plot height times the
    axes' aspect, plus the side margins and room for a colour bar. None for other figures."""
    layout = fig.layout
    if layout.yaxis.scaleanchor != "x":
        return None
    x_range, y_range = layout.xaxis.range, layout.yaxis.range
    if x_range is None or y_range is None:
        grids = [np.shape(t.z) for t in fig.data if t.type == "heatmap" and t.z is not None]
        if not grids:
            return None
        rows, cols = grids[0][:2]
        x_range, y_range = (0, cols), (0, rows)
    aspect = abs(x_range[1] - x_range[0]) / max(abs(y_range[1] - y_range[0]), 1e-9)
    margin = layout.margin
    plot_height = height - (margin.t or 0) - (margin.b or 0)
    scale_bar = 110 if any(t.type == "heatmap" and t.showscale is not False for t in fig.data) else 0
    return int(round(plot_height * aspect + (margin.l or 0) + (margin.r or 0) + scale_bar))


def _vector(fig: go.Figure, fmt: str, width: int | None, height: int | None) -> bytes:
    height = height or int(fig.layout.height or 500)
    width = width or natural_width(fig, height) or DEFAULT_WIDTH
    try:
        return _kaleido(fig, fmt, width, height, 1.0)
    except MissingExtraError:
        raise
    except Exception as err:  # kaleido/Chrome missing, failing or past the time limit
        raise RolloutError(f"{fmt.upper()} export needs kaleido and Chrome/Chromium, which failed: {err}") from err


def raster_png(fig: go.Figure) -> bytes:
    """The numpy/PIL rendering used by `figure_png` when kaleido cannot run (see there for what it draws)."""
    image_traces = [t for t in fig.data if t.type == "image"]
    heatmaps = [t for t in fig.data if t.type == "heatmap" and t.z is not None and (t.xaxis or "x") == "x"]
    bars = [t for t in fig.data if t.type == "bar" and t.y is not None and t.orientation != "h"]
    if bars and not image_traces and not heatmaps:
        return _png(_bar_pixels(bars[0]))
    if not image_traces and not heatmaps:
        raise RolloutError("PNG export of this figure needs kaleido with Chrome/Chromium, which could not run here.")
    if image_traces:
        canvas = _image_pixels(image_traces[0])
    else:
        rows, cols = np.asarray(heatmaps[0].z, dtype=np.float64).shape
        cell = max(1, _FALLBACK_SIDE // max(rows, cols))
        canvas = np.full((rows * cell, cols * cell, 3), 255.0)
    top_down = bool(image_traces) or _y_reversed(fig)
    for trace in heatmaps:
        rgb, alpha = _colour_cells(fig, trace)
        if not top_down:
            rgb, alpha = rgb[::-1], alpha[::-1]
        rgb, alpha = _stretch(rgb, canvas.shape[:2]), _stretch(alpha[..., None], canvas.shape[:2])
        opacity = 1.0 if trace.opacity is None else float(trace.opacity)
        canvas = canvas * (1 - alpha * opacity) + rgb * alpha * opacity
    return _png(canvas)


def _png(canvas: np.ndarray) -> bytes:
    from PIL import Image

    buffer = io.BytesIO()
    Image.fromarray(np.clip(np.rint(canvas), 0, 255).astype(np.uint8), mode="RGB").save(buffer, format="PNG")
    return buffer.getvalue()


_BAR_HEIGHT = 300  # pixels of the tallest bar's column in the fallback bar chart


def _bar_pixels(trace: go.Bar) -> np.ndarray:
    """(H, W, 3) white canvas with one bar per value (heights relative to the largest, bottom-aligned),
    each in its marker colour from the trace's colour scale (or the marker's single colour)."""
    values = np.nan_to_num(np.asarray(trace.y, dtype=np.float64), nan=0.0).clip(min=0.0)
    width = max(4, _FALLBACK_SIDE // max(len(values), 1))
    canvas = np.full((_BAR_HEIGHT, width * len(values), 3), 255.0)
    top = float(values.max()) if values.size and values.max() > 0 else 1.0
    marker = trace.marker
    if marker.color is not None and not isinstance(marker.color, str):
        cmin = 0.0 if marker.cmin is None else float(marker.cmin)
        cmax = top if marker.cmax is None else float(marker.cmax)
        t = np.clip((np.asarray(marker.color, dtype=np.float64) - cmin) / (cmax - cmin or 1.0), 0.0, 1.0)
        scale = [list(s) for s in marker.colorscale] if marker.colorscale is not None else "Plasma"
        colours = np.asarray(sample_colorscale(scale, t.tolist(), colortype="tuple"), dtype=np.float64) * 255
    else:
        colours = np.tile([99.0, 110.0, 250.0], (len(values), 1))  # plotly's first default colour
    for k, value in enumerate(values):
        height = int(round(_BAR_HEIGHT * value / top))
        if height:
            canvas[_BAR_HEIGHT - height:, k * width + 1:(k + 1) * width - 1] = colours[k]
    return canvas


FORMULA_STARTS = "=+-@\t\r"
"""First characters that make a spreadsheet read a cell as a formula (OWASP's CSV injection list)."""


def scores_csv(expl: ExplanationData) -> bytes:
    """UTF-8 CSV, one row per position: token, special, character span or patch row/col, raw score, display
    score (blank for special positions), then the raw row after each layer and each layer's own attention.

    Cells starting with = + - @, tab or carriage return (and longer than one character) get a leading
    apostrophe, so that a spreadsheet does not run user text as a formula.
    """
    import pandas as pd

    n = len(expl.tokens)
    display = np.full(n, np.nan)
    display[expl.display_positions()] = expl.display_scores()
    frame = pd.DataFrame({"position": np.arange(n), "token": [_cell(t) for t in expl.tokens],
                          "special": np.asarray(expl.special, dtype=bool)})
    if expl.offsets is not None:
        frame["char_start"] = [int(s) for s, _ in expl.offsets]
        frame["char_end"] = [int(e) for _, e in expl.offsets]
    if expl.patch_positions is not None and expl.grid is not None:
        rows = np.full(n, -1)
        cols = np.full(n, -1)
        for k, pos in enumerate(np.asarray(expl.patch_positions)):
            rows[pos], cols[pos] = divmod(k, expl.grid[1])
        frame["patch_row"], frame["patch_col"] = rows, cols
    frame["score"] = np.asarray(expl.scores, dtype=np.float64)
    frame["display_score"] = display
    start = int(expl.settings.get("start_layer") or 0)
    for k in range(expl.num_layers):
        frame[f"{expl.method}_after_layer_{start + k + 1}"] = np.asarray(expl.layer_scores[k], dtype=np.float64)
    for k in range(expl.num_layers):
        frame[f"attention_layer_{start + k + 1}"] = np.asarray(expl.layer_attention_scores[k], dtype=np.float64)
    return frame.to_csv(index=False, float_format="%.9g", lineterminator="\r\n").encode("utf-8")


def scores_json(expl: ExplanationData) -> bytes:
    """UTF-8 JSON of `Explanation.to_dict()` (tokens, scores, layer rows, prediction, settings) plus, for
    text with offsets, "words": [[word, start, end, share], ...] as on the pages."""
    out = expl.to_dict()
    if expl.kind == "text" and expl.text is not None and expl.offsets is not None:
        from rollout_core.compare import word_scores

        out["words"] = [[w, s, e, float(f"{v:.7g}")] for w, s, e, v in word_scores(expl)]
    return json.dumps(out, ensure_ascii=False, default=_json_default).encode("utf-8")


KALEIDO_TIMEOUT_S = 30.0
"""Longest wait for one render (PNG, SVG or PDF); past it the export fails (and falls back) instead of hanging a
download."""


def kaleido_options() -> dict:
    """Options for kaleido's browser: the local Chromium, plotly.js from the installed plotly package and no
    MathJax, so the export never fetches a script from a CDN (on an offline server such a fetch can hang
    until kaleido's own 90 s timeout, longer than a browser waits for a download)."""
    browser = os.environ.get("BROWSER_PATH") or shutil.which("chromium") or shutil.which("chromium-browser")
    opts: dict = {"mathjax": False, "timeout": KALEIDO_TIMEOUT_S}
    if browser:
        opts["path"] = browser
    return opts


_KALEIDO_WORKER = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="kaleido")


def _kaleido(fig: go.Figure, fmt: str, width: int, height: int, scale: float) -> bytes:
    """Kaleido's `fmt` ("png", "svg", "pdf") rendering, waited for at most KALEIDO_TIMEOUT_S of wall clock: kaleido's
    own timeout covers a render, not a browser start that never answers, so the call runs on a worker thread and is
    abandoned past the limit."""
    kaleido = require("kaleido", "export", what=f"{fmt.upper()} export")

    job = _KALEIDO_WORKER.submit(
        kaleido.calc_fig_sync, fig.to_dict(), opts=dict(format=fmt, width=width, height=height, scale=scale),
        kopts=kaleido_options(),
    )
    return job.result(timeout=KALEIDO_TIMEOUT_S)


def _image_pixels(trace: go.Image) -> np.ndarray:
    """(H, W, 3) float pixels of an Image trace, from its `z` array or its data-URI `source`."""
    if trace.z is not None:
        return np.asarray(trace.z, dtype=np.float64)[..., :3]
    import base64

    from PIL import Image

    payload = trace.source.split(",", 1)[1]
    with Image.open(io.BytesIO(base64.b64decode(payload))) as image:
        return np.asarray(image.convert("RGB"), dtype=np.float64)


def _colour_cells(fig: go.Figure, trace: go.Heatmap) -> tuple[np.ndarray, np.ndarray]:
    """(rows, cols, 3) colours of a heatmap's cells as Plotly maps them, and (rows, cols) alpha (0 for NaN)."""
    z = np.asarray(trace.z, dtype=np.float64)
    scale, zmin, zmax = trace.colorscale, trace.zmin, trace.zmax
    if trace.coloraxis:
        axis = fig.layout[trace.coloraxis]
        scale, zmin, zmax = axis.colorscale, axis.cmin, axis.cmax
    finite = z[np.isfinite(z)]
    zmin = float(finite.min() if finite.size else 0.0) if zmin is None else float(zmin)
    zmax = float(finite.max() if finite.size else 1.0) if zmax is None else float(zmax)
    t = np.clip((np.nan_to_num(z, nan=zmin) - zmin) / (zmax - zmin or 1.0), 0.0, 1.0)
    scale = [list(s) for s in scale] if scale is not None else "Plasma"
    colours = sample_colorscale(scale, t.ravel().tolist(), colortype="tuple")
    rgb = np.asarray(colours, dtype=np.float64).reshape(*z.shape, 3) * 255
    return rgb, np.isfinite(z).astype(np.float64)


def _stretch(values: np.ndarray, shape: tuple[int, int]) -> np.ndarray:
    """Nearest-neighbour upsampling of (r, c, k) cells to (H, W, k): cell i covers rows i*H/r .. (i+1)*H/r."""
    rows = (np.arange(shape[0]) * values.shape[0]) // shape[0]
    cols = (np.arange(shape[1]) * values.shape[1]) // shape[1]
    return values[rows][:, cols]


def _y_reversed(fig: go.Figure) -> bool:
    axis = fig.layout.yaxis
    return axis.autorange == "reversed" or (axis.range is not None and axis.range[0] > axis.range[1])


def _cell(text: str) -> str:
    return "'" + text if len(text) > 1 and text[0] in FORMULA_STARTS else text


def _json_default(value):
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):
        return value.tolist()
    return str(value)
