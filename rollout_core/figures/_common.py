"""What every figure shares: which row of an explanation is drawn, colour scales, axis labels."""
from __future__ import annotations

import unicodedata
from functools import lru_cache

import numpy as np
from plotly.colors import get_colorscale

from rollout_core import methods
from rollout_core.errors import InputError
from rollout_core.explanation_data import ExplanationData

SCORE_SCALE = "YlOrRd"
"""Sequential scale for shares (light = little, dark red = much): readable as a text background."""
DIFFERENCE_SCALE = "RdBu_r"
"""Diverging scale for differences, centred at 0 (blue: the first side weighs more, red: the second)."""
COLORMAPS = ("viridis", "inferno", "magma", "turbo", "jet", "hot", "gray", "ylorrd")
"""Colour maps offered for image overlays (Plotly named scales)."""
SPECIAL_GREY = "rgba(128,128,128,0.35)"
HOVER_FORMAT = ".6g"
"""Hover shows values to 6 significant digits; the figure data keeps full float64."""


def row_scores(expl: ExplanationData, layer: int | None = None, raw_attention: bool = False) -> np.ndarray:
    """The (n,) row to draw: final scores, the cumulative result after layer index `layer`
    (`layer_scores[layer]`), or that layer's own fused attention (`layer_attention_scores[layer]`)."""
    if layer is None:
        if raw_attention:
            raise InputError("Raw attention is per layer: choose a layer.")
        return np.asarray(expl.scores, dtype=np.float64)
    _check_layer(expl, layer)
    source = expl.layer_attention_scores if raw_attention else expl.layer_scores
    return np.asarray(source[layer], dtype=np.float64)


def method_title(method: str) -> str:
    """A method's display name from the registry ("ALTI rollout"); the id itself for names outside it
    (attribution baselines, a method an old saved file names)."""
    return methods.get(method).title if method in methods.names() else method


def total_layers(expl: ExplanationData) -> int:
    """The model's number of layers (the slider may cover fewer: a start or end layer, fine-tuned blocks)."""
    return int(expl.settings.get("model_layers") or model_layer(expl, expl.num_layers - 1))


def layer_words(expl: ExplanationData, layer: int) -> str:
    """Which model layer of how many layer index `layer` is: "layer 4 of 12"."""
    return f"layer {model_layer(expl, layer)} of {total_layers(expl)}"


def view_title(expl: ExplanationData, layer: int | None = None, raw_attention: bool = False) -> str:
    """Plain words for what a view shows, naming the method by its display name and the layer of how many:
    "Attention rollout up to layer 4 of 12", "... up to layer 12 of 12 (final)", "ALTI rollout, layers 11-12 of
    12 (final)" (a start layer), "raw attention of layer 4 of 12" (the per-layer view, or a method that shows one
    layer), "AttnLRP (relevance propagation), whole model" (one map of the model, the same at every position)."""
    spec = methods.get(expl.method) if expl.method in methods.names() else None
    index = expl.num_layers - 1 if layer is None else int(layer)
    where = layer_words(expl, index)
    if raw_attention or (spec is not None and spec.single_layer):
        return f"{spec.layer_view if spec else 'raw attention'} of {where}"
    if spec is not None and not spec.layered:
        return f"{spec.title}, whole model"
    final = " (final)" if index == expl.num_layers - 1 else ""
    start = int(expl.settings.get("start_layer") or 0)
    if start and index and (spec is None or spec.cumulative):
        layers = f"{start + 1}-{model_layer(expl, index)} of {total_layers(expl)}"
        return f"{method_title(expl.method)}, layers {layers}{final}"
    if start and (spec is None or spec.cumulative):
        return f"{method_title(expl.method)}, {where}{final}"
    joint = " up to " if spec is None or spec.cumulative else " at "
    return f"{method_title(expl.method)}{joint}{where}{final}"


def is_cumulative(method: str) -> bool:
    """Whether a method's layer-k view accumulates layers 1..k (its registry spec says; raw attention shows layer
    k alone, AttnLRP one map of the whole model); names outside the registry (attribution baselines) do not."""
    from rollout_core import methods

    return method in methods.names() and methods.get(method).cumulative


def one_map(*methods: str) -> bool:
    """Whether every method shown gives one map of the whole model (AttnLRP): the slider then moves only the
    per-layer (raw) view, so the explorer shows it only there."""
    from rollout_core import methods as registry

    return bool(methods) and all(m in registry.names() and not registry.get(m).layered for m in methods)


def slider_label(*methods: str) -> str:
    """The layer slider's label: it only says "cumulative" when every method shown accumulates layers."""
    return "Layer (cumulative rollout up to this layer)" if all(map(is_cumulative, methods)) else "Layer"


def raw_slider_label(*methods: str) -> str:
    """The layer slider's label while the per-layer view is on: what one layer alone shows."""
    views = list(dict.fromkeys(_layer_view(m) for m in methods)) or ["raw attention"]
    return f"Layer (its own {' / '.join(views)}, this layer alone)"


def raw_label(*methods: str) -> str:
    """The raw-view toggle's label: what each method's per-layer view shows (its registry `layer_view`), e.g.
    "Show this layer's own attention instead", "Show this layer's own ALTI contributions instead"."""
    views = list(dict.fromkeys(_layer_view(m) for m in methods)) or ["raw attention"]
    shown = " / ".join("attention" if v == "raw attention" else v for v in views)
    return f"Show this layer's own {shown} instead"


def _layer_view(method: str) -> str:
    from rollout_core import methods

    return methods.get(method).layer_view if method in methods.names() else "raw attention"


def model_layer(expl: ExplanationData, layer: int) -> int:
    """1-based model layer number of layer index `layer` (index 0 = the first rolled-out layer)."""
    return int(expl.settings.get("start_layer") or 0) + int(layer) + 1


def _check_layer(expl: ExplanationData, layer: int) -> None:
    if not 0 <= int(layer) < expl.num_layers:
        raise InputError(f"Layer index {layer} is outside 0..{expl.num_layers - 1}.")


def colours_at(scale: str, values: np.ndarray, zmin: float, zmax: float) -> list[tuple[int, int, int]]:
    """RGB of every value on `scale` (clipped to zmin..zmax), in one pass: linear interpolation in RGB between
    the scale's stops, which is how Plotly samples a colour scale (`plotly.colors.sample_colorscale`)."""
    positions, stops = _resolved_scale(scale)
    span = zmax - zmin
    t = np.zeros(len(values)) if span <= 0 else np.clip((np.asarray(values, np.float64) - zmin) / span, 0.0, 1.0)
    rgb = np.stack([np.interp(t, positions, stops[:, c]) for c in range(3)], axis=1)
    return [tuple(int(v) for v in row) for row in np.round(rgb).astype(int)]


def scale_stops(scale: str) -> list[list[float]]:
    """A named scale as [position, r, g, b] stops (0..1, 0..255): what the browser's colour function interpolates
    between (layer_colours.js `colourAt`, the twin of `colours_at`)."""
    positions, stops = _resolved_scale(scale)
    return [[float(p), *map(float, rgb)] for p, rgb in zip(positions, stops)]


@lru_cache(maxsize=64)
def _resolved_scale(scale: str) -> tuple[np.ndarray, np.ndarray]:
    """A named Plotly scale as (positions, RGB stops 0..255): looking a name up costs ~1 ms in Plotly."""
    from plotly.colors import unlabel_rgb, validate_colors

    named = get_colorscale(scale)
    positions = np.array([float(p) for p, _ in named])
    stops = np.array([unlabel_rgb(c) for c in validate_colors([c for _, c in named], colortype="rgb")], np.float64)
    return positions, stops


def luminance(rgb: tuple[int, int, int]) -> float:
    """WCAG relative luminance of an sRGB colour (0 black .. 1 white)."""
    channels = []
    for c in rgb:
        c = c / 255
        channels.append(c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4)
    return 0.2126 * channels[0] + 0.7152 * channels[1] + 0.0722 * channels[2]


def ink_for(rgb: tuple[int, int, int]) -> str:
    """Black or white text, whichever contrasts more with the background (WCAG threshold)."""
    return "#000000" if luminance(rgb) > 0.179 else "#ffffff"


SIGNED_SCALE = DIFFERENCE_SCALE
"""Signed maps (evidence for and against the class): red for, blue against, white at 0."""
FLAT_FLOOR = 2.0
"""A map of shares is coloured up to at least this many times the uniform share (1/n): a flat map then reads as
pale, half way up the scale, instead of every position stretched to the darkest colour."""


def colour_range(values: np.ndarray, signed: bool = False) -> tuple[float, float]:
    """(bottom, top) of the colour scale of shown `values` (shares summing to 1, or signed shares): -m..m around
    0 for signed ones (m the largest size), else 0 to the largest share, but never below FLAT_FLOOR / n."""
    values = np.asarray(values, dtype=np.float64)
    if signed:
        size = float(np.nanmax(np.abs(values))) if values.size else 0.0
        size = size if size > 0 else 1.0
        return -size, size
    return 0.0, max(positive_max(values), FLAT_FLOOR / values.size if values.size else 0.0)


def value_title(expl: ExplanationData) -> str:
    """What a shown value is, for axes and legends."""
    return "signed share: for (+) / against (−)" if expl.signed else "share of the shown mass"


def scale_of(expl: ExplanationData, scale: str = SCORE_SCALE) -> str:
    """The colour scale to draw `expl` with: `scale`, or the diverging SIGNED_SCALE for signed values."""
    return SIGNED_SCALE if expl.signed else scale


def positive_max(values: np.ndarray) -> float:
    """Top of a 0-based colour scale: the largest value, or 1 when there is nothing positive."""
    values = np.asarray(values, dtype=np.float64)
    top = float(np.nanmax(values)) if values.size else 0.0
    return top if top > 0 else 1.0


KEPT_CONTROLS = {"\n", "\t", "\u200c", "\u200d"}
"""Control/format characters drawn as they are: line breaks, tabs and the joiners scripts need (ZWNJ, ZWJ)."""


def is_hidden(char: str) -> bool:
    """A control (Cc) or format (Cf) character, e.g. the bidi overrides U+202A-202E, U+2066-2069, U+200E/F."""
    return char not in KEPT_CONTROLS and unicodedata.category(char) in ("Cc", "Cf")


def visible_code(char: str) -> str:
    """The character's code as text: "\\u202e"."""
    return f"\\u{ord(char):04x}" if ord(char) <= 0xFFFF else f"\\U{ord(char):08x}"


def visible(text: str) -> str:
    """`text` with each control/format character written as its code, so a right-to-left override in a token
    cannot reorder an axis, a legend or a hover label on screen."""
    return "".join(visible_code(c) if is_hidden(c) else c for c in text)


def clean_token(token: str) -> str:
    """Axis label of a token: the GPT-2 "Ġ" and SentencePiece "▁" markers dropped ("##" kept), control and
    format characters written as their codes (`visible`)."""
    stripped = token.replace("\u0120", " ").replace("\u2581", " ").strip()
    return visible(stripped or token)


TICK_CHARS = 18
"""Tick labels longer than this are cut (with "…"); the hover keeps the whole token."""
TICK_FONT_PX = 12
CHAR_WIDTH = 0.6
"""Average glyph width of the tick font, as a fraction of its size (Plotly's default sans-serif)."""
TITLE_STANDOFF = 12
"""Pixels between the tick labels and the axis title."""
TITLE_PX = 16


def _clip(label: str) -> str:
    return label if len(label) <= TICK_CHARS else label[: TICK_CHARS - 1] + "…"


TICK_LIMIT = 30
"""At most this many labelled ticks: slanted 12 px labels stay apart down to about 20 px each, which a 600 px
plot gives 30 of (more are thinned out; every bar keeps its label on hover)."""


def _labelled(count: int, limit: int, values: np.ndarray | None) -> list[int]:
    """Which of `count` positions get a label: all up to `limit`; beyond, every k-th, or with `values` the
    largest ones first, each at least n / limit positions from the ones already labelled (the bars a reader
    looks for carry their names), in position order."""
    if count <= limit:
        return list(range(count))
    gap = int(np.ceil(count / limit))
    if values is None:
        return list(range(0, count, gap))
    chosen: list[int] = []
    for i in np.argsort(-np.abs(np.asarray(values, np.float64)), kind="stable"):
        if all(abs(int(i) - j) >= gap for j in chosen):
            chosen.append(int(i))
        if len(chosen) == limit:
            break
    return sorted(chosen)


def _tick_labels(labels: list[str], limit: int, values: np.ndarray | None = None) -> tuple[list[int], list[str], int]:
    idx = _labelled(len(labels), limit, values)
    text = [_clip(visible(labels[i])) for i in idx]
    angle = -45 if len(idx) > 8 or any(len(t) > 10 for t in text) else 0
    return idx, text, angle


def tick_axis(labels: list[str], limit: int = TICK_LIMIT, title: str | None = None,
              values: np.ndarray | None = None) -> dict:
    """Category ticks by position (so repeated tokens keep their own slot), at most `limit` labels (the
    largest of `values` first when given, see `_labelled`), control and format characters written as their
    codes, cut to TICK_CHARS characters and slanted when many or long; with `title`, the axis title stands off
    the labels."""
    idx, text, angle = _tick_labels(labels, limit, values)
    axis = dict(tickmode="array", tickvals=idx, ticktext=text, tickangle=angle, automargin=True)
    if title is not None:
        axis["title"] = dict(text=title, standoff=TITLE_STANDOFF)
    return axis


def tick_margin(labels: list[str], limit: int = TICK_LIMIT) -> int:
    """Bottom margin (px) that holds `tick_axis`'s labels, the standoff and the axis title without overlap."""
    _, text, angle = _tick_labels(labels, limit)
    longest = max((len(t) for t in text), default=1) * CHAR_WIDTH * TICK_FONT_PX
    extent = longest * abs(np.sin(np.radians(angle))) + TICK_FONT_PX * abs(np.cos(np.radians(angle)))
    return int(np.ceil(extent)) + 8 + TITLE_STANDOFF + TITLE_PX + 8
