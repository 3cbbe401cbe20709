"""Text views: the escaped token-highlight HTML and the bar chart of display scores."""
from __future__ import annotations

import html

import numpy as np
import plotly.graph_objects as go

from rollout_core.compare import token_spans, word_scores, words
from rollout_core.explanation_data import ExplanationData
from rollout_core.figures._common import (
    HOVER_FORMAT,
    SCORE_SCALE,
    SPECIAL_GREY,
    clean_token,
    colours_at,
    ink_for,
    is_hidden,
    colour_range,
    row_scores,
    scale_of,
    tick_axis,
    tick_margin,
    value_title,
    view_title,
    visible,
    visible_code,
)

_SPAN_STYLE = "padding:0.1em 0.15em;border-radius:0.25em;"
def escape_visible(text: str) -> str:
    """HTML-escape `text`, drawing each control/format character as its visible code (\\u202e) in a span.

    A raw right-to-left override in a token would otherwise reorder the rest of the page on screen.
    """
    out = []
    for char in text:
        if is_hidden(char):
            out.append(f'<span class="ctrl-char" style="font-family:monospace;opacity:0.7">{visible_code(char)}</span>')
        else:
            out.append(html.escape(char, quote=True))
    return "".join(out)


def code_runs(text: str) -> list[str]:
    """`text` split at its control/format characters: [text, code, text, ...] (runs 1, 3, ... are codes such as
    "\\u202e"), the browser's form of `escape_visible` (explorer_payload.Piece)."""
    runs = [""]
    for char in text:
        if is_hidden(char):
            runs += [visible_code(char), ""]
        else:
            runs[-1] += char
    return runs


def highlight_pieces(expl: ExplanationData) -> list[list[int | str]]:
    """The token highlight's text as the explorer's pieces ([unit, *code_runs], explorer_payload.Piece), the same
    text `token_highlight_html` draws (tokens only, special tokens left out): unit k is display position k (its
    value is `display_scores()[k]`), -1 is text between tokens."""
    spans = {pos: (s, e) for pos, s, e in token_spans(expl)}
    text = expl.text if expl.text is not None and expl.offsets is not None else None
    pieces: list[list[int | str]] = []
    cursor = 0
    for unit, pos in enumerate(expl.display_positions().tolist()):
        if text is not None:
            start, end = spans[pos]
            if end <= start:
                continue  # a piece sharing characters with the previous token: its share is in the bars
            if start > cursor:
                pieces.append([-1, *code_runs(text[cursor:start])])
            label = text[start:end]
            cursor = max(cursor, end)
        else:
            if pieces:
                pieces.append([-1, " "])
            label = clean_token(expl.tokens[pos])
        pieces.append([unit, *code_runs(label)])
    if text is not None and cursor < len(text):
        pieces.append([-1, *code_runs(text[cursor:])])
    return pieces


def word_pieces(text: str) -> list[list[int | str]]:
    """The text as the explorer's pieces per word (`compare.words`, the units of `compare.word_scores`): unit k
    is word k, -1 the text between words."""
    pieces: list[list[int | str]] = []
    cursor = 0
    for unit, (_, start, end) in enumerate(words(text)):
        if start > cursor:
            pieces.append([-1, *code_runs(text[cursor:start])])
        pieces.append([unit, *code_runs(text[start:end])])
        cursor = end
    if cursor < len(text):
        pieces.append([-1, *code_runs(text[cursor:])])
    return pieces


def _attr(text: str) -> str:
    """An escaped attribute value (hover title) with control/format characters written as codes."""
    return html.escape(visible(text), quote=True)


def token_highlight_html(
    expl: ExplanationData,
    *,
    layer: int | None = None,
    raw_attention: bool = False,
    level: str = "token",
    show_special: bool = False,
    zmax: float | None = None,
    colorscale: str = SCORE_SCALE,
    marker: str = "",
) -> str:
    """The explained text with each token's (or word's, `level="word"`) background coloured by its score.

    Scores are display scores (special tokens left out, the rest renormalised); the colour runs from 0 to
    `zmax` (default: the largest shown score) on one scale, shown in a legend. With offsets the original
    characters of the text are drawn (subword pieces join back into words; the text between tokens is
    kept); without them the tokens are drawn. Every piece of user text is HTML-escaped, the exact value is
    in each span's `title` (hover), and the text colour follows the background's luminance.
    `show_special` draws special tokens greyed, with their raw (not renormalised) score on hover.
    `marker` (escaped) goes into the outer div's `data-view`, so a page can tell which view is drawn.
    """
    scores = row_scores(expl, layer, raw_attention)
    shown = expl.display_scores(scores)
    bottom, top = colour_range(shown, expl.signed)
    top = top if zmax is None else float(zmax)
    bottom = -top if expl.signed else bottom
    colorscale = scale_of(expl, colorscale)
    segments = _segments(expl, scores, level)
    colours = colours_at(colorscale, np.array([value for *_, value in segments]), bottom, top)
    parts: list[str] = []
    text = expl.text if expl.text is not None and expl.offsets is not None else None
    cursor = 0
    for (kind, start, end, label, value), rgb in zip(segments, colours):
        if kind == "special":
            if show_special:
                title = f"{label} (special, not shown in the map): raw score {value:{HOVER_FORMAT}}"
                chip = (
                    f'<span class="tok-special" title="{_attr(title)}" style="{_SPAN_STYLE}'
                    f'background:{SPECIAL_GREY};font-size:0.8em;font-style:italic">{escape_visible(label)}</span>'
                )
                parts.append(f" {chip}" if parts else f"{chip} ")
            continue
        if text is not None:
            if end <= start:
                continue  # a piece sharing characters with the previous token: its share is in the bars
            if start > cursor:
                parts.append(escape_visible(text[cursor:start]))
            label = text[start:end]
            cursor = max(cursor, end)
        elif parts:
            parts.append(" ")
        title = f"{label}: {value:{HOVER_FORMAT}} ({_share_words(value, expl.signed)})"
        parts.append(
            f'<span class="tok" data-score="{value!r}" title="{_attr(title)}" style="{_SPAN_STYLE}'
            f'background:rgb{rgb};color:{ink_for(rgb)}">{escape_visible(label)}</span>'
        )
    if text is not None and cursor < len(text):
        parts.append(escape_visible(text[cursor:]))
    caption = escape_visible(view_title(expl, layer, raw_attention))
    return (
        f'<div class="token-highlight" data-view="{html.escape(marker, quote=True)}" '
        f'style="line-height:2.2;white-space:pre-wrap">{"".join(parts)}</div>'
        + legend_html(bottom, top, colorscale, caption=f"{caption}: {escape_visible(value_title(expl))}")
    )


def _share_words(value: float, signed: bool) -> str:
    """A value in words for a hover: "12.00% of the shown mass", or "+12.00% (for)" / "−3.10% (against)"."""
    if not signed:
        return f"{100 * value:.2f}% of the shown mass"
    return f"{100 * value:+.2f}% of the evidence ({'for' if value >= 0 else 'against'})"


def legend_html(zmin: float, zmax: float, colorscale: str = SCORE_SCALE, *, caption: str = "") -> str:
    """A colour bar from zmin to zmax with both ends labelled (caption is escaped by the caller)."""
    stops = ",".join(f"rgb{rgb}" for rgb in colours_at(colorscale, np.linspace(0.0, 1.0, 11), 0.0, 1.0))
    return (
        '<div class="token-legend" style="display:flex;align-items:center;gap:0.5em;font-size:0.8em;margin-top:0.3em">'
        f'<span>{zmin:.3g}</span><span style="display:inline-block;width:12em;height:0.8em;border-radius:0.2em;'
        f'background:linear-gradient(to right,{stops})"></span><span>{zmax:.3g}</span><span>{caption}</span></div>'
    )


def score_bar(
    expl: ExplanationData,
    *,
    layer: int | None = None,
    raw_attention: bool = False,
    level: str = "token",
    zmax: float | None = None,
    colorscale: str = SCORE_SCALE,
) -> go.Figure:
    """Bar chart of the display scores (or word scores, `level="word"`), bars coloured on the same scale
    as the highlight, exact values on hover. Images: one bar per patch, labelled "patch r,c"."""
    scores = row_scores(expl, layer, raw_attention)
    if level == "word":
        words = word_scores(expl, scores)
        labels = [visible(w) for w, *_ in words]
        values = np.array([v for *_, v in words])
    else:
        labels = [clean_token(t) for t in expl.display_tokens()]
        values = expl.display_scores(scores)
    bottom, top = colour_range(values, expl.signed)
    top = top if zmax is None else float(zmax)
    bottom = -top if expl.signed else bottom
    fig = go.Figure(
        go.Bar(
            x=list(range(len(labels))),
            y=values,
            customdata=labels,
            marker=dict(color=values, colorscale=scale_of(expl, colorscale), cmin=bottom, cmax=top,
                        colorbar=dict(title="for / against" if expl.signed else "share")),
            hovertemplate=f"%{{customdata}}: %{{y:{HOVER_FORMAT}}}<extra></extra>",
        )
    )
    fig.update_layout(
        title=view_title(expl, layer, raw_attention),
        xaxis=tick_axis(labels, title="word" if level == "word" else "token", values=values),
        yaxis=dict(title=value_title(expl), range=[bottom * 1.05, top * 1.05]),
        margin=dict(l=50, r=10, t=40, b=tick_margin(labels)),
        height=280 + tick_margin(labels),
    )
    return fig


def _segments(expl: ExplanationData, scores: np.ndarray, level: str) -> list[tuple[str, int, int, str, float]]:
    """(kind, start, end, label, value) in reading order: "special" (raw score) and "token"/"word" pieces."""
    if level == "word":
        words = [("word", s, e, w, v) for w, s, e, v in word_scores(expl, scores)]
        shown = expl.display_positions()
        first = shown[0] if shown.size else len(expl.tokens)
        specials = [("special", 0, 0, expl.tokens[i], float(scores[i])) for i in np.flatnonzero(expl.special)]
        leading = [sp for sp, i in zip(specials, np.flatnonzero(expl.special)) if i < first]
        return leading + words + specials[len(leading):]  # [CLS] before the words, [SEP]/padding after
    shown = dict(zip(expl.display_positions().tolist(), expl.display_scores(scores).tolist()))
    spans = {pos: (s, e) for pos, s, e in token_spans(expl)}
    out = []
    for pos, token in enumerate(expl.tokens):
        if pos in shown:
            s, e = spans[pos]
            out.append(("token", s, e, clean_token(token), shown[pos]))
        else:
            out.append(("special", 0, 0, token, float(scores[pos])))
    return out
