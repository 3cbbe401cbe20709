"""Faithfulness curves: several methods' deletion or insertion curves and a random baseline in one plot."""
from __future__ import annotations

from typing import Mapping, Sequence

import numpy as np
import plotly.graph_objects as go
from plotly.colors import qualitative

from rollout_core.figures._common import HOVER_FORMAT

Curve = tuple[Sequence[float], Sequence[float]]
PALETTE = (*qualitative.Dark2[:7], *qualitative.Set1[:3])
"""Qualitative colours, one per method (none of them grey: grey is the random baseline)."""
DASHES = ("solid", "dot", "dashdot", "longdash", "longdashdot")
SYMBOLS = ("circle", "square", "diamond", "triangle-up", "x", "cross", "star", "hexagon")
"""Each method also gets its own dash and marker, so lines that coincide stay visible under one another."""


def curves_figure(
    curves: Mapping[str, Curve],
    *,
    random: Curve | None = None,
    title: str = "Deletion curves",
    x_title: str = "fraction of tokens/patches removed (most relevant first)",
    y_title: str = "probability of the explained class",
    aucs: Mapping[str, float] | None = None,
) -> go.Figure:
    """One line per method (`curves`: name -> (fractions, values)) in its own colour, dash and marker, the
    random-order baseline dashed grey.

    `aucs` (name -> area, "random" for the baseline) are appended to the legend names when given; the
    areas come from the faithfulness module, not from here.
    """
    fig = go.Figure()

    def legend(name: str) -> str:
        return f"{name} (AUC {aucs[name]:.3g})" if aucs and name in aucs else name

    for i, (name, (x, y)) in enumerate(curves.items()):
        fig.add_trace(go.Scatter(
            x=np.asarray(x, dtype=float), y=np.asarray(y, dtype=float), mode="lines+markers", name=legend(name),
            line=dict(color=PALETTE[i % len(PALETTE)], dash=DASHES[i % len(DASHES)], width=2),
            marker=dict(symbol=SYMBOLS[i % len(SYMBOLS)], size=7),
            hovertemplate=f"{name}: %{{x:.3g}} \u2192 %{{y:{HOVER_FORMAT}}}<extra></extra>",
        ))
    if random is not None:
        x, y = random
        fig.add_trace(go.Scatter(
            x=np.asarray(x, dtype=float), y=np.asarray(y, dtype=float), mode="lines", name=legend("random"),
            line=dict(color="grey", dash="dash"),
            hovertemplate=f"random order: %{{x:.3g}} \u2192 %{{y:{HOVER_FORMAT}}}<extra></extra>",
        ))
    fig.update_layout(title=title, xaxis=dict(title=x_title, range=[0, 1]), yaxis=dict(title=y_title),
                      height=400, margin=dict(l=60, r=10, t=40, b=50), legend=dict(orientation="h", y=-0.2))
    return fig
