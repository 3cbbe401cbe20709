"""Two explanations of one input on one colour scale, and their difference on a scale centred at 0."""
from __future__ import annotations

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from rollout_core import compare
from rollout_core.explanation_data import ExplanationData
from rollout_core.figures._common import (
    DIFFERENCE_SCALE,
    HOVER_FORMAT,
    SCORE_SCALE,
    positive_max,
    row_scores,
    tick_axis,
    tick_margin,
    visible,
)
from rollout_core.figures.image import DEFAULT_COLORMAP, grid_figure, patch_map


def shared_zmax(*expls: ExplanationData, layer: int | None = None, raw_attention: bool = False) -> float:
    """Top of one colour scale for several explanations: the largest shown share among them."""
    tops = []
    for expl in expls:
        scores = row_scores(expl, layer, raw_attention)
        tops.append(positive_max(expl.score_map(scores) if expl.kind == "image" else expl.display_scores(scores)))
    return max(tops)


def comparison_figure(
    a: ExplanationData,
    b: ExplanationData,
    *,
    layer: int | None = None,
    raw_attention: bool = False,
    labels: tuple[str, str] = ("A", "B"),
    zmax: float | None = None,
    colorscale: str | None = None,
) -> go.Figure:
    """A and B side by side with the same zmin (0) and zmax (default: `shared_zmax`).

    Text: one row per side over the common units of `rollout_core.compare.compare` (tokens, or words
    when the tokenizers differ). Images: the two patch grids, each on its own grid, one colour bar.
    """
    top = shared_zmax(a, b, layer=layer, raw_attention=raw_attention) if zmax is None else float(zmax)
    if a.kind == "image":
        scale = colorscale or DEFAULT_COLORMAP
        fig = make_subplots(rows=1, cols=2, subplot_titles=list(labels), horizontal_spacing=0.06)
        for col, expl in enumerate((a, b), start=1):
            values = patch_map(expl, layer, raw_attention)
            hover = f"row %{{y}}, col %{{x}}: %{{z:{HOVER_FORMAT}}}<extra>{labels[col - 1]}</extra>"
            fig.add_trace(go.Heatmap(z=values, coloraxis="coloraxis", name=labels[col - 1], hovertemplate=hover),
                          row=1, col=col)
        fig.update_yaxes(autorange="reversed", title="patch row")
        fig.update_xaxes(title="patch column")
        fig.update_layout(coloraxis=dict(colorscale=scale, cmin=0.0, cmax=top, colorbar=dict(title="share")),
                          height=420, margin=dict(l=50, r=10, t=40, b=40), title="Same colour scale on both sides")
        return fig
    result = _compared(a, b, layer, raw_attention)
    z = np.vstack([result.a, result.b])
    shown = [visible(u) for u in result.units]
    fig = go.Figure(go.Heatmap(
        z=z, y=list(labels), x=list(range(len(result.units))), colorscale=colorscale or SCORE_SCALE,
        zmin=0.0, zmax=top, customdata=np.array([shown, shown], dtype=object),
        colorbar=dict(title="share"),
        hovertemplate=f"%{{y}}, %{{customdata}}: %{{z:{HOVER_FORMAT}}}<extra></extra>",
    ))
    unit = "word" if result.aligned_by_words else "token"
    fig.update_layout(title=f"Same colour scale on both sides (per {unit})",
                      xaxis=tick_axis(result.units, title=unit, values=np.maximum(result.a, result.b)),
                      yaxis=dict(autorange="reversed"), height=200 + tick_margin(result.units),
                      margin=dict(l=60, r=10, t=40, b=tick_margin(result.units)))
    return fig


def difference_figure(
    a: ExplanationData,
    b: ExplanationData,
    *,
    layer: int | None = None,
    raw_attention: bool = False,
    labels: tuple[str, str] = ("A", "B"),
    zmax: float | None = None,
    comparison: compare.Comparison | None = None,
) -> go.Figure:
    """A − B per common unit on a diverging scale centred at 0 (red: A gives more, blue: B gives more).

    The scale is symmetric, ±`zmax` (default: the largest absolute difference). Images on different grids
    are compared on the finer grid (see `rollout_core.compare`; the note is in the title). A page that
    has already compared the two rows passes that `comparison` to draw it instead of comparing again.
    """
    result = _compared(a, b, layer, raw_attention) if comparison is None else comparison
    diff = np.asarray(result.a) - np.asarray(result.b)
    bound = positive_max(np.abs(diff)) if zmax is None else float(zmax)
    name = f"{labels[0]} \u2212 {labels[1]}"
    if a.kind == "image":
        shape = _grid_shape(a, b)
        fig = grid_figure(diff.reshape(shape), title=name, colormap=DIFFERENCE_SCALE, zmin=-bound, zmax=bound)
    else:
        fig = go.Figure(go.Bar(
            x=list(range(len(result.units))), y=diff, customdata=[visible(u) for u in result.units],
            marker=dict(color=diff, colorscale=DIFFERENCE_SCALE, cmin=-bound, cmax=bound, colorbar=dict(title=name)),
            hovertemplate=f"%{{customdata}}: {name} = %{{y:{HOVER_FORMAT}}}<extra></extra>",
        ))
        fig.update_layout(xaxis=tick_axis(result.units, title="word" if result.aligned_by_words else "token",
                                          values=diff),
                          yaxis=dict(title=name, range=[-bound * 1.05, bound * 1.05]),
                          height=260 + tick_margin(result.units), title=name,
                          margin=dict(l=50, r=10, t=40, b=tick_margin(result.units)))
    if result.note:
        fig.update_layout(title=f"{name}<br><sub>{_escape(result.note)}</sub>")
    return fig


def _compared(a: ExplanationData, b: ExplanationData, layer: int | None, raw_attention: bool) -> compare.Comparison:
    return compare.compare(a, b, scores_a=row_scores(a, layer, raw_attention),
                           scores_b=row_scores(b, layer, raw_attention))


def _grid_shape(a: ExplanationData, b: ExplanationData) -> tuple[int, int]:
    (ra, ca), (rb, cb) = a.grid, b.grid
    return max(ra, rb), max(ca, cb)


def _escape(text: str) -> str:
    import html

    return html.escape(text, quote=True)
