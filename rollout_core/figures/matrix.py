"""Matrix views: the final matrix or a layer's attention with tokens on both axes, and per-head maps."""
from __future__ import annotations

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from rollout_core.errors import InputError
from rollout_core.explanation_data import ExplanationData
from rollout_core.figures._common import (
    HOVER_FORMAT,
    SCORE_SCALE,
    TICK_LIMIT,
    TITLE_STANDOFF,
    _check_layer,
    clean_token,
    model_layer,
    positive_max,
    tick_axis,
    tick_margin,
)

SPECIALS = ("grey", "hide", "show")
"""How special tokens appear in a matrix: greyed (kept, off the colour scale), hidden, or shown on it."""
_GREY_SCALE = [[0.0, "rgb(200,200,200)"], [1.0, "rgb(90,90,90)"]]


def matrix_heatmap(
    expl: ExplanationData,
    *,
    layer: int | None = None,
    head: int | None = None,
    specials: str = "grey",
    zmax: float | None = None,
    colorscale: str = SCORE_SCALE,
) -> go.Figure:
    """Heatmap of M[i, j] = share of input (key) token j in output (query) token i; rows top-down.

    `layer=None`: the final matrix (rollout/flow/gradient); `layer=k`: the fused raw attention of layer
    index k; with `head=h` as well: that single head (needs `keep_heads`). Special tokens are greyed
    (their cells drawn in grey, off the colour scale, values still on hover), hidden, or shown. The colour
    scale runs from 0 to `zmax` (default: the largest non-grey cell). Values are not renormalised.
    """
    values, title = _matrix(expl, layer, head)
    fig = go.Figure()
    for trace in _cells(expl, values, specials, zmax, colorscale, coloraxis=None, name=title):
        fig.add_trace(trace)
    labels = _labels(expl, specials)
    fig.update_layout(
        title=title,
        xaxis=dict(title=dict(text="input token (key, column j)", standoff=TITLE_STANDOFF), type="category",
                   automargin=True, tickangle=tick_axis(labels)["tickangle"], nticks=TICK_LIMIT),
        yaxis=dict(title=dict(text="output token (query, row i)", standoff=TITLE_STANDOFF), autorange="reversed",
                   type="category", automargin=True, nticks=2 * TICK_LIMIT),
        height=max(380, min(900, 14 * len(labels) + 160)),
        margin=dict(l=80, r=10, t=40, b=tick_margin(labels)),
    )
    return fig


RELEVANCE_NOTE = (
    "Gradient-weighted rollout's matrix is R = I + Σ Ā·R over the layers, where Ā is each layer's attention "
    "weighted by the positive gradient of one class score (Chefer et al. 2021). That gradient only reaches what "
    "feeds the explained output, so every other row stays the identity plus near-zero terms and the matrix "
    "looks like a plain diagonal. What it says is in the explained row, shown here: how relevant each token is "
    "to the class.")


def matrix_note(expl: ExplanationData) -> str | None:
    """Why the final matrix of `expl` is not drawn (a whole-model method has only its relevance row; a
    class-specific rollout's matrix means something only in the explained row, see RELEVANCE_NOTE), or None when
    the matrix is worth showing."""
    from rollout_core import methods

    try:
        spec = methods.get(expl.method)
    except InputError:  # an explanation of a method this registry does not know: draw its matrix
        return None
    if not spec.layered:  # AttnLRP, knockout Shapley: one relevance per input token, no token-to-token matrix
        return (f"{spec.title} gives one {'signed ' if spec.signed else ''}relevance per input token for the "
                "explained output, not a token-to-token matrix: that row is shown here"
                + (" (red for the class, blue against it)." if spec.signed else "."))
    return RELEVANCE_NOTE if spec.class_specific else None


def head_grid(
    expl: ExplanationData,
    layer: int,
    *,
    specials: str = "hide",
    zmax: float | None = None,
    colorscale: str = SCORE_SCALE,
    cols: int = 4,
) -> go.Figure:
    """Small multiples: one heatmap per head of layer index `layer`, on one shared colour scale.

    Trace h (the first H traces, in head order) is head h, so a click's curve number is the head to show
    large with `matrix_heatmap(expl, layer=layer, head=h)`; grey special cells come after them.
    """
    heads = _heads(expl, layer)
    count = heads.shape[0]
    cols = max(1, min(cols, count))
    rows = -(-count // cols)
    fig = make_subplots(
        rows=rows, cols=cols, subplot_titles=[f"head {h + 1}" for h in range(count)],
        horizontal_spacing=0.03, vertical_spacing=0.25 / rows,
    )
    keep = _kept(expl, specials)
    top = float(zmax) if zmax is not None else positive_max(
        heads[:, ~expl.special][:, :, ~expl.special] if specials == "grey" else heads[:, keep][:, :, keep]
    )
    main, grey = [], []
    for h in range(count):
        traces = _cells(expl, heads[h], specials, top, colorscale, coloraxis="coloraxis", name=f"head {h + 1}")
        main.append((h, traces[0]))
        grey.extend((h, t) for t in traces[1:])
    for h, trace in main + grey:
        fig.add_trace(trace, row=h // cols + 1, col=h % cols + 1)
    fig.update_xaxes(showticklabels=False)
    fig.update_yaxes(showticklabels=False, autorange="reversed")
    fig.update_layout(
        title=f"Layer {model_layer(expl, layer)}: each head (rows = query tokens, columns = key tokens)",
        coloraxis=dict(colorscale=colorscale, cmin=0.0, cmax=top, colorbar=dict(title="attention")),
        height=170 * rows + 90,
        margin=dict(l=10, r=10, t=70, b=10),
    )
    return fig


def _matrix(expl: ExplanationData, layer: int | None, head: int | None) -> tuple[np.ndarray, str]:
    if head is not None:
        if layer is None:
            raise InputError("Choose a layer to see one of its heads.")
        heads = _heads(expl, layer)
        if not 0 <= head < heads.shape[0]:
            raise InputError(f"Head {head + 1} does not exist: layer has {heads.shape[0]} heads.")
        return heads[head], f"Layer {model_layer(expl, layer)}, head {head + 1}: attention"
    if layer is not None:
        _check_layer(expl, layer)
        return np.asarray(expl.layer_attention[layer], dtype=np.float64), (
            f"Layer {model_layer(expl, layer)}: raw attention ({expl.settings.get('head_fusion', 'mean')} over heads)"
        )
    if expl.matrix is None:
        raise InputError(f"No full matrix for {expl.method} on this input: only the explained row was computed "
                         "(explain with full_matrix=True, `--full-matrix` in the CLI), or choose a layer.")
    return np.asarray(expl.matrix, dtype=np.float64), f"Final {expl.method} matrix"


def _heads(expl: ExplanationData, layer: int) -> np.ndarray:
    if expl.head_attention is None:
        raise InputError("Per-head attention was not kept: explain again with keep_heads=True.")
    _check_layer(expl, layer)
    return np.asarray(expl.head_attention[layer], dtype=np.float64)


def _kept(expl: ExplanationData, specials: str) -> np.ndarray:
    if specials not in SPECIALS:
        raise InputError(f"specials must be one of {', '.join(SPECIALS)}, not {specials!r}.")
    return np.flatnonzero(~expl.special) if specials == "hide" else np.arange(len(expl.tokens))


def _labels(expl: ExplanationData, specials: str) -> list[str]:
    """Category labels of the kept positions; a repeated token gets " (2)", " (3)"... so that each
    position keeps its own row and column (Plotly merges equal categories)."""
    seen: dict[str, int] = {}
    out = []
    for i in _kept(expl, specials):
        token = clean_token(expl.tokens[i])
        seen[token] = seen.get(token, 0) + 1
        out.append(token if seen[token] == 1 else f"{token} ({seen[token]})")
    return out


def _cells(
    expl: ExplanationData, values: np.ndarray, specials: str, zmax: float | None, colorscale: str,
    *, coloraxis: str | None, name: str,
) -> list[go.Heatmap]:
    """The main heatmap trace (on the colour scale) and, for "grey", one grey trace of the special cells."""
    keep = _kept(expl, specials)
    sub = values[np.ix_(keep, keep)]
    labels = _labels(expl, specials)
    where = dict(x=labels, y=labels)
    pair = "output %{y} \u2190 input %{x}"
    special = np.asarray(expl.special, dtype=bool)[keep]
    grey_mask = (special[:, None] | special[None, :]) if specials == "grey" else np.zeros(sub.shape, dtype=bool)
    on_scale = np.where(grey_mask, np.nan, sub).astype(np.float32)  # float32: 7 digits, half the bytes to send
    top = float(zmax) if zmax is not None else positive_max(on_scale[~grey_mask] if (~grey_mask).any() else sub)
    hover = f"{pair}: %{{z:{HOVER_FORMAT}}}<extra>{name}</extra>"
    axis = dict(coloraxis=coloraxis) if coloraxis else dict(colorscale=colorscale, zmin=0.0, zmax=top)
    traces = [go.Heatmap(z=on_scale, hovertemplate=hover, name=name, hoverongaps=False, **where, **axis)]
    if grey_mask.any():
        traces.append(go.Heatmap(
            z=np.where(grey_mask, sub, np.nan).astype(np.float32), colorscale=_GREY_SCALE, showscale=False,
            hoverongaps=False,
            name=f"{name} (special)", hovertemplate=f"{pair}: %{{z:{HOVER_FORMAT}}}<extra>special token (grey)</extra>",
            **where,
        ))
    return traces
