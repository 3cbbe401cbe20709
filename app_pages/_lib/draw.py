"""Drawing what the core returns: Plotly figures and the escaped token-highlight HTML.

Display only: scores arrive computed (and renormalised by `Explanation.display_scores`); here they are
mapped to colours, one colour scale per view (`zmax` is shared by the figures of one view).
"""
from __future__ import annotations

import html
from typing import Sequence

import numpy as np
import plotly.graph_objects as go
from plotly.colors import sample_colorscale
from plotly.subplots import make_subplots

SCALE = "Reds"
COLORMAPS = ("Inferno", "Viridis", "Jet", "Reds", "Greys")


def token_html(tokens: Sequence[str], scores: np.ndarray, zmax: float, *, marker: str = "") -> str:
    """Tokens with a background coloured by score; every token is HTML-escaped, the value shows on hover."""
    zmax = zmax if zmax > 0 else 1.0
    spans = []
    for token, score in zip(tokens, scores):
        level = float(np.clip(score / zmax, 0.0, 1.0))
        colour = sample_colorscale(SCALE, [level])[0]
        ink = "#fff" if level > 0.6 else "#111"
        spans.append(
            f'<span title="{html.escape(token, quote=True)}: {score:.4f}" style="background:{colour};color:{ink};'
            f'padding:2px 4px;margin:2px;border-radius:4px;display:inline-block">{html.escape(token)}</span>'
        )
    legend = (f'<div style="font-size:0.8em;margin-top:6px">0 <span style="display:inline-block;width:120px;height:10px;'
              f'background:linear-gradient(to right,{sample_colorscale(SCALE, [0.0])[0]},'
              f'{sample_colorscale(SCALE, [1.0])[0]})"></span> {zmax:.3f} (share of the explained output)</div>')
    return (f'<div class="token-highlight" data-view="{html.escape(marker, quote=True)}" '
            f'style="line-height:2.1">{" ".join(spans)}{legend}</div>')


def bars(tokens: Sequence[str], scores: np.ndarray, zmax: float, title: str) -> go.Figure:
    labels = _unique(tokens)
    fig = go.Figure(go.Bar(x=labels, y=scores, marker=dict(color=scores, colorscale=SCALE, cmin=0, cmax=zmax),
                           hovertemplate="%{x}: %{y:.4f}<extra></extra>"))
    fig.update_layout(title=title, yaxis_title="score", yaxis_range=[0, zmax * 1.05], height=320,
                      margin=dict(l=40, r=10, t=40, b=40))
    return fig


def heatmap(matrix: np.ndarray, tokens: Sequence[str], title: str, *, zmax: float | None = None,
            scale: str = SCALE, height: int = 460) -> go.Figure:
    """Rows = outputs, columns = inputs (R[i, j] = share of input j in output i)."""
    labels = _unique(tokens)
    fig = go.Figure(go.Heatmap(z=matrix, x=labels, y=labels, colorscale=scale, zmin=0, zmax=zmax,
                               hovertemplate="output %{y} ← input %{x}: %{z:.4f}<extra></extra>"))
    fig.update_layout(title=title, height=height, yaxis_autorange="reversed", margin=dict(l=60, r=10, t=40, b=60),
                      xaxis_title="input position", yaxis_title="output position")
    return fig


def head_grid(heads: np.ndarray, tokens: Sequence[str], layer: int) -> go.Figure:
    """Small multiples: one (n, n) attention map per head of one layer, on one colour scale.

    The maps are laid out as tiles of a single heatmap (gaps left blank), which Plotly builds and
    redraws far faster than one subplot per head; hover names the head and the two tokens.
    """
    count, n = heads.shape[0], heads.shape[-1]
    cols = min(count, 6)
    rows = (count + cols - 1) // cols
    gap = max(1, n // 6)
    size = n + gap
    tiles = np.full((rows * size - gap, cols * size - gap), np.nan)
    text = np.full(tiles.shape, "", dtype=object)
    pairs = np.array([[f"{tokens[i]} ← {tokens[j]}" for j in range(n)] for i in range(n)], dtype=object)
    for h in range(count):
        r, c = divmod(h, cols)
        tiles[r * size:r * size + n, c * size:c * size + n] = heads[h]
        text[r * size:r * size + n, c * size:c * size + n] = f"head {h}: " + pairs
    fig = go.Figure(go.Heatmap(z=tiles, text=text, colorscale=SCALE, zmin=0, zmax=float(np.nanmax(tiles)) or 1.0,
                               hovertemplate="%{text}: %{z:.4f}<extra></extra>", hoverongaps=False))
    for h in range(count):
        r, c = divmod(h, cols)
        fig.add_annotation(x=c * size + (n - 1) / 2, y=r * size - 0.5, text=f"head {h}", showarrow=False,
                           yanchor="bottom", font=dict(size=11))
    fig.update_xaxes(visible=False)
    fig.update_yaxes(visible=False, autorange="reversed", scaleanchor="x")
    fig.update_layout(title=f"Layer {layer}: every head (rows = outputs, columns = inputs)",
                      height=130 * rows + 90, margin=dict(l=10, r=10, t=70, b=10), plot_bgcolor="rgba(0,0,0,0)")
    return fig


def overlay(image: np.ndarray, score_map: np.ndarray, *, opacity: float, scale: str, zmax: float,
            title: str) -> go.Figure:
    """The score map drawn over the image it explains: map row r covers image rows r*ph..(r+1)*ph."""
    height, width = image.shape[:2]
    rows, cols = score_map.shape
    fig = go.Figure(go.Image(z=image, hoverinfo="skip"))
    fig.add_trace(go.Heatmap(z=score_map, x0=width / cols / 2 - 0.5, dx=width / cols, y0=height / rows / 2 - 0.5,
                             dy=height / rows, colorscale=scale, zmin=0, zmax=zmax, opacity=opacity,
                             hovertemplate="patch row %{y:.0f}, col %{x:.0f}: %{z:.4f}<extra></extra>"))
    _image_axes(fig, title)
    return fig


def patch_grid(score_map: np.ndarray, *, scale: str, zmax: float, title: str) -> go.Figure:
    fig = go.Figure(go.Heatmap(z=score_map, colorscale=scale, zmin=0, zmax=zmax,
                               hovertemplate="patch row %{y}, col %{x}: %{z:.4f}<extra></extra>"))
    _image_axes(fig, title)
    fig.update_yaxes(autorange="reversed")
    return fig


def picture(image: np.ndarray, title: str) -> go.Figure:
    fig = go.Figure(go.Image(z=image))
    _image_axes(fig, title)
    return fig


def _image_axes(fig: go.Figure, title: str) -> None:
    fig.update_xaxes(showticklabels=False, showgrid=False)
    fig.update_yaxes(showticklabels=False, showgrid=False, scaleanchor="x")
    fig.update_layout(title=title, height=420, margin=dict(l=10, r=10, t=40, b=10))


def _unique(tokens: Sequence[str]) -> list[str]:
    """Plotly merges equal category labels; number repeated tokens so each position keeps its own slot."""
    seen: dict[str, int] = {}
    out = []
    for token in tokens:
        seen[token] = seen.get(token, 0) + 1
        out.append(token if seen[token] == 1 else f"{token} ({seen[token]})")
    return out


def difference(units: Sequence[str], a: np.ndarray, b: np.ndarray) -> go.Figure:
    """A and B per unit on one scale, and A − B below (red: A gives more weight, blue: B does)."""
    labels = _unique(units)
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    fig = make_subplots(rows=2, cols=1, shared_xaxes=True, subplot_titles=["A and B", "A − B"], vertical_spacing=0.12)
    fig.add_trace(go.Bar(x=labels, y=a, name="A", hovertemplate="%{x}: A %{y:.4f}<extra></extra>"), row=1, col=1)
    fig.add_trace(go.Bar(x=labels, y=b, name="B", hovertemplate="%{x}: B %{y:.4f}<extra></extra>"), row=1, col=1)
    diff = a - b
    bound = float(np.abs(diff).max()) or 1.0
    fig.add_trace(go.Bar(x=labels, y=diff, name="A − B", showlegend=False,
                         marker=dict(color=diff, colorscale="RdBu_r", cmin=-bound, cmax=bound),
                         hovertemplate="%{x}: A − B %{y:.4f}<extra></extra>"), row=2, col=1)
    fig.update_layout(barmode="group", height=480, margin=dict(l=40, r=10, t=40, b=40))
    return fig
