"""Figures of a comparison of two corpus runs: the rank correlation's distribution, the units whose mean share
moved most in a class (a diverging bar chart with bootstrap intervals), and an image class's mean difference map.

They take plain arrays and DataFrames (the tables of `rollout_core.corpus.compare_runs.CorpusComparison`), so
the figures layer does not depend on the corpus layer. Names from the data (classes, words) are drawn with their
control characters as codes and HTML-escaped: plotly reads a little HTML in its labels.
"""
from __future__ import annotations

import html

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from rollout_core.figures._common import DIFFERENCE_SCALE, visible

MORE_IN_B = "rgb(202,0,32)"
MORE_IN_A = "rgb(5,113,176)"
BINS = 40


def label(text: object) -> str:
    """A name from the data as a plotly label: control characters as codes, HTML escaped."""
    return html.escape(visible(str(text)), quote=False)


def spearman_histogram(values: np.ndarray, bins: int = BINS) -> go.Figure:
    """Counts of the rows' rank correlations in `bins` equal bins over [-1, 1] (NaNs left out, their number in
    the title). The counts are computed here, so the figure's size does not grow with the rows."""
    values = np.asarray(values, dtype=np.float64)
    defined = values[~np.isnan(values)]
    counts, edges = np.histogram(defined, bins=bins, range=(-1.0, 1.0))
    centres = (edges[:-1] + edges[1:]) / 2
    fig = go.Figure(go.Bar(x=centres, y=counts, width=edges[1] - edges[0], marker_color="rgb(99,110,250)",
                           customdata=np.stack([edges[:-1], edges[1:]], axis=1),
                           hovertemplate="Spearman %{customdata[0]:.2f} to %{customdata[1]:.2f}: %{y} rows"
                                         "<extra></extra>"))
    undefined = len(values) - len(defined)
    note = f" ({undefined} rows undefined: fewer than two units or a constant side)" if undefined else ""
    fig.update_layout(title=f"Rank correlation of A's and B's explanations per row{note}", bargap=0.02,
                      xaxis=dict(title="Spearman's rho over the units both runs see", range=[-1.02, 1.02]),
                      yaxis=dict(title="rows"), height=340, margin=dict(l=60, r=20, t=50, b=50))
    return fig


def moved_units_figure(moved: pd.DataFrame, cls: str) -> go.Figure:
    """The class's moved units (columns unit, diff, low, high, count) as horizontal bars of B - A, the largest
    move on top, red where B leans on the unit more, blue where A did; whiskers: the bootstrap interval."""
    rows = moved.iloc[::-1]
    diff = rows["diff"].to_numpy(dtype=np.float64)
    low, high = rows["low"].to_numpy(dtype=np.float64), rows["high"].to_numpy(dtype=np.float64)
    units = [label(u) for u in rows["unit"]]
    fig = go.Figure(go.Bar(
        x=diff, y=list(range(len(rows))), orientation="h",
        marker_color=[MORE_IN_B if d > 0 else MORE_IN_A for d in diff],
        error_x=dict(type="data", symmetric=False, array=np.nan_to_num(high - diff),
                     arrayminus=np.nan_to_num(diff - low), color="rgba(40,40,40,0.7)", thickness=1.2),
        customdata=np.stack([rows["count"].to_numpy(), low, high], axis=1), text=units, textposition="none",
        hovertemplate="%{text}: %{x:+.4f} (interval %{customdata[1]:+.4f} to %{customdata[2]:+.4f}), "
                      "%{customdata[0]} occurrences<extra></extra>"))
    fig.update_layout(
        title=f"{label(cls)}: mean share B - A (red: B leans on it more; blue: A did)",
        yaxis=dict(tickmode="array", tickvals=list(range(len(rows))), ticktext=units, automargin=True),
        xaxis=dict(title="change of the mean share (B - A)", zeroline=True, zerolinecolor="#444"),
        height=max(240, 40 + 24 * len(rows)), margin=dict(l=20, r=20, t=50, b=50), showlegend=False)
    return fig


def difference_map_figure(grid: np.ndarray, cls: str) -> go.Figure:
    """An image class's mean difference map (B - A per patch) on a scale centred at 0."""
    values = np.asarray(grid, dtype=np.float64)
    top = float(np.nanmax(np.abs(values))) if np.isfinite(values).any() else 1.0
    fig = go.Figure(go.Heatmap(z=values, colorscale=DIFFERENCE_SCALE, zmid=0.0, zmin=-top or -1.0, zmax=top or 1.0,
                               colorbar=dict(title="B - A"),
                               hovertemplate="patch %{y},%{x}: %{z:+.5f}<extra></extra>"))
    fig.update_yaxes(autorange="reversed", title="patch row", scaleanchor="x")
    fig.update_xaxes(title="patch column")
    fig.update_layout(title=f"{label(cls)}: mean share B - A per patch", height=380,
                      margin=dict(l=50, r=10, t=50, b=40))
    return fig


def patch_pair_figure(map_a: np.ndarray, map_b: np.ndarray, title: str) -> go.Figure:
    """One row's two patch maps side by side on one colour scale (0 to the larger maximum)."""
    from plotly.subplots import make_subplots

    top = max(float(np.max(map_a, initial=0.0)), float(np.max(map_b, initial=0.0))) or 1.0
    fig = make_subplots(rows=1, cols=2, subplot_titles=["A", "B"], horizontal_spacing=0.08)
    for col, values in enumerate((map_a, map_b), start=1):
        fig.add_trace(go.Heatmap(z=values, coloraxis="coloraxis",
                                 hovertemplate="patch %{y},%{x}: %{z:.4f}<extra></extra>"), row=1, col=col)
    fig.update_yaxes(autorange="reversed")
    fig.update_layout(coloraxis=dict(colorscale="YlOrRd", cmin=0.0, cmax=top, colorbar=dict(title="share")),
                      title=label(title), height=300, margin=dict(l=30, r=10, t=60, b=30))
    return fig
