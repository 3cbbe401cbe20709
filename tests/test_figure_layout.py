"""Layout of the token figures on long text: axis titles clear of the tick labels (values checked by hand)."""
from __future__ import annotations

import math

import numpy as np

from rollout_core import figures as F
from test_figures import _text_expl

LONG = "antidisestablishmentarianism"


def _long_expl(n_words: int = 30):
    tokens = ["[CLS]"] + [f"{LONG}{i}" for i in range(n_words)] + ["[SEP]"]
    text = " ".join(tokens[1:-1])
    offsets, pos = [(0, 0)], 0
    for t in tokens[1:-1]:
        offsets.append((pos, pos + len(t)))
        pos += len(t) + 1
    offsets.append((0, 0))
    scores = np.linspace(0.1, 1.0, len(tokens))
    return _text_expl(tokens, offsets, scores / scores.sum(), text)


def _clear_below(layout, room: float) -> None:
    """The bottom margin holds `room` px of slanted labels plus the standoff and a 14 px title line."""
    axis = layout.xaxis
    assert axis.automargin is True and axis.title.standoff >= 10
    assert layout.margin.b >= room + axis.title.standoff + 14


def test_long_tokens_are_cut_slanted_and_the_title_stands_clear() -> None:
    fig = F.score_bar(_long_expl())
    axis = fig.layout.xaxis
    assert axis.tickangle == -45 and all(len(t) <= 18 for t in axis.ticktext)
    assert axis.ticktext[0] == LONG[:17] + "…"
    # 18 characters at ~0.6 x 12 px, slanted 45 degrees: 18 * 7.2 * sin 45 = 91.6 px of labels
    _clear_below(fig.layout, 18 * 7.2 * math.sin(math.radians(45)))
    assert fig.layout.height - fig.layout.margin.b >= 250  # the plot itself keeps its height


def test_short_labels_stay_level_with_a_small_margin() -> None:
    tokens = ["[CLS]", "a", "good", "film", "[SEP]"]
    fig = F.score_bar(_text_expl(tokens, [(0, 0), (0, 1), (2, 6), (7, 11), (0, 0)], [0.1, 0.3, 0.4, 0.1, 0.1],
                                 "a good film"))
    assert fig.layout.xaxis.tickangle == 0
    _clear_below(fig.layout, 12)  # one level line of 12 px text
    assert fig.layout.margin.b < 80


def test_matrix_axis_titles_stand_off_the_token_labels() -> None:
    fig = F.matrix_heatmap(_long_expl(12))
    for axis in (fig.layout.xaxis, fig.layout.yaxis):
        assert axis.automargin is True and axis.title.standoff >= 10
    _clear_below(fig.layout, 18 * 7.2 * math.sin(math.radians(45)))


def test_at_512_tokens_the_bars_name_the_largest_tokens_with_room_between_labels() -> None:
    rng = np.random.default_rng(0)
    words = [f"w{i}" for i in range(512)]
    scores = rng.random(514) ** 8
    offsets, pos = [(0, 0)], 0
    for w in words:
        offsets.append((pos, pos + len(w)))
        pos += len(w) + 1
    fig = F.score_bar(_text_expl(["[CLS]", *words, "[SEP]"], offsets + [(0, 0)], scores / scores.sum(),
                                 " ".join(words)))
    ticks = list(fig.layout.xaxis.tickvals)
    assert len(ticks) <= F._common.TICK_LIMIT  # about 20 px per slanted label on a 600 px plot
    gap = int(np.ceil(512 / F._common.TICK_LIMIT))
    assert all(b - a >= gap for a, b in zip(ticks, ticks[1:]))  # never crowded
    shown = scores[1:-1]
    assert int(np.argmax(shown)) in ticks  # the tallest bar is named
    labelled = set(ticks)
    for i in np.argsort(-shown)[:10]:  # each of the ten tallest is named, or sits within a gap of a named one
        assert i in labelled or any(abs(int(i) - t) < gap for t in labelled)
    assert [fig.layout.xaxis.ticktext[k] for k in range(len(ticks))] == [words[t] for t in ticks]


def test_image_figures_export_without_empty_bands_beside_the_image() -> None:
    from test_figures import _image_expl

    values = np.arange(1.0, 17.0).reshape(4, 4)
    expl = _image_expl(values / values.sum(), image=np.zeros((224, 224, 3), np.uint8))
    for fig in (F.image_overlay(expl), F.patch_heatmap(expl)):
        height = int(fig.layout.height)
        width = F.export.natural_width(fig, height)
        plot_height = height - fig.layout.margin.t - fig.layout.margin.b
        # a square image: the plot is as wide as it is high, plus the side margins and the colour bar
        assert width == plot_height + fig.layout.margin.l + fig.layout.margin.r + 110
    assert F.export.natural_width(F.score_bar(_long_expl()), 400) is None  # other figures keep the default width
