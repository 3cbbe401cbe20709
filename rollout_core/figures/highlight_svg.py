"""The token highlight as a plain SVG for papers: one <rect> and one <text> element per token (no HTML, no
foreignObject, no script), so LaTeX tools (Inkscape's PDF+LaTeX export, the svg package) keep the words as text.

Lines are broken between tokens at `width` pixels; a monospaced font makes each token's width
`len(token) * CHAR_WIDTH * font_size`, so the layout needs no browser. Each rect's <title> carries the exact share.
"""
from __future__ import annotations

from xml.sax.saxutils import escape, quoteattr

import numpy as np

from rollout_core.explanation_data import ExplanationData
from rollout_core.figures._common import (
    SCORE_SCALE,
    clean_token,
    colour_range,
    colours_at,
    ink_for,
    row_scores,
    scale_of,
    value_title,
    view_title,
    visible,
)

CHAR_WIDTH = 0.6
"""Advance of one character of a monospaced font, in units of the font size."""
_GAP = 0.35  # space between tokens, in font sizes
_LINE = 1.7  # line height, in font sizes


def _xml_text(text: str) -> str:
    """`text` as valid XML 1.0 character data: control and format characters (bidi overrides) written as codes."""
    return escape(visible(text))


def token_highlight_svg(expl: ExplanationData, *, layer: int | None = None, raw_attention: bool = False,
                        zmax: float | None = None, colorscale: str = SCORE_SCALE, width: int = 640,
                        font_size: int = 14) -> str:
    """The displayed tokens (special ones left out) on backgrounds coloured by their share, 0..`zmax` (default:
    the largest share), with a caption naming the view; the same row and scale as `token_highlight_html`."""
    scores = expl.display_scores(row_scores(expl, layer, raw_attention))
    bottom, top = colour_range(scores, expl.signed)
    top = top if zmax is None else float(zmax)
    bottom = -top if expl.signed else bottom
    tokens = [clean_token(t) for t in expl.display_tokens()]
    colours = colours_at(scale_of(expl, colorscale), scores, bottom, top)
    pad, line = font_size * 0.3, font_size * _LINE
    x, y, parts = 0.0, 0.0, []
    for token, value, rgb in zip(tokens, np.asarray(scores, dtype=np.float64), colours):
        box = len(token) * CHAR_WIDTH * font_size + 2 * pad
        if x > 0 and x + box > width:
            x, y = 0.0, y + line
        fill = "#{:02x}{:02x}{:02x}".format(*rgb)
        parts.append(
            f'<g class="tok"><rect x="{x:.1f}" y="{y:.1f}" width="{box:.1f}" height="{line - 4:.1f}" rx="3" '
            f'fill="{fill}"><title>{_xml_text(token)}: {value:.6g}</title></rect>'
            f'<text x="{x + pad:.1f}" y="{y + font_size * 1.15:.1f}" fill="{ink_for(rgb)}">'
            f'{_xml_text(token)}</text></g>'
        )
        x += box + _GAP * font_size
    caption_y = y + line + font_size
    caption = f"{view_title(expl, layer, raw_attention)}: {value_title(expl)}, {bottom:.3g} to {top:.3g}"
    height = caption_y + font_size * 0.5
    font = quoteattr("DejaVu Sans Mono, Menlo, Consolas, monospace")
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height:.0f}" '
        f'viewBox="0 0 {width} {height:.0f}" font-family={font} font-size="{font_size}">'
        + "".join(parts)
        + f'<text x="0" y="{caption_y:.1f}" font-size="{font_size * 0.8:.1f}" fill="#444444">'
        + f'{_xml_text(caption)}</text>'
        "</svg>\n"
    )
