"""The CLI's plain-text views tell the truth about the method (issue 26 item 3): rows per word by default (tokens
on request), the method's display name, signed methods on a diverging bar (against left of the centre line, for
right of it) with the patches against listed, flat maps drawn short, and the pages' summary under the table."""
from __future__ import annotations

import re

import numpy as np
import pytest

from rollout_core import methods
from rollout_core.cli import BAR_WIDTH, render_image, render_text

TEXT = "the zany movie was good"  # "zany" is cut into its letters by the tiny WordPiece vocabulary


def _rows(shown: str) -> list[tuple[str, str, float]]:
    """(name, bar, value) of each table row: `'name'  bar  value`."""
    rows = re.findall(r"^'(.*?)'\s+(\S+)\s+([-+]?\d\.\d{4})$", shown, flags=re.M)
    return [(name, bar, float(value)) for name, bar, value in rows]


@pytest.fixture(scope="module")
def bert(tiny_handle):
    return tiny_handle("bert")


def test_rows_are_the_words_by_default_each_the_sum_of_its_pieces_and_tokens_on_request(bert) -> None:
    from rollout_core.explain import explain_text

    e = explain_text(bert, TEXT, method="rollout")
    assert sum(not s for s in e.special) > len(TEXT.split())  # a word really is cut into pieces
    by_word = _rows(render_text(e))
    assert [name for name, _, _ in by_word] == TEXT.split()
    # naive reference: every shown token's score goes to the whitespace word its characters fall in
    shown = ~np.asarray(e.special, dtype=bool)
    scores = np.asarray(e.scores, dtype=np.float64)
    starts = [TEXT.index(w, sum(len(x) + 1 for x in TEXT.split()[:i])) for i, w in enumerate(TEXT.split())]
    sums = [sum(scores[t] for t in np.flatnonzero(shown) if s <= e.offsets[t][0] < s + len(w))
            for s, w in zip(starts, TEXT.split())]
    assert [v for _, _, v in by_word] == pytest.approx(list(np.array(sums) / sum(sums)), abs=1e-4)
    by_token = _rows(render_text(e, tokens=True))
    assert [name for name, _, _ in by_token] == [t for t, s in zip(e.tokens, e.special) if not s]


def test_the_header_names_the_method_and_the_summary_follows_the_table(bert) -> None:
    from rollout_core.explain import explain_text
    from rollout_core.summary import summarize

    e = explain_text(bert, TEXT, method="alti")
    shown = render_text(e)
    assert f"method: {methods.display_name('alti')} [alti]" in shown.splitlines()[0]
    summary = shown[shown.index("summary: "):]
    assert " ".join(summary.removeprefix("summary: ").split()) == " ".join(summarize(e).split())


def test_a_flat_map_is_drawn_short_not_stretched_to_full_width(bert) -> None:
    from rollout_core.explain import explain_text

    e = explain_text(bert, TEXT, method="rollout")
    rows = _rows(render_text(e))
    uniform = 1 / len(rows)
    top = max(v for _, _, v in rows)
    longest = max(bar.count("█") for _, bar, _ in rows)
    # the scale's top is never below twice the uniform share, so a share s fills s / max(top, 2/n) of the bar
    assert longest == round(BAR_WIDTH * top / max(top, 2 * uniform))
    if top < 2 * uniform:
        assert longest < BAR_WIDTH


def test_signed_text_diverges_around_zero_and_says_so(bert) -> None:
    from rollout_core.explain import explain_text

    e = explain_text(bert, TEXT, method="grad_x_input")
    assert e.signed
    shown = render_text(e)
    assert "left (▒) against it" in shown
    rows = _rows(shown)
    assert any(v < 0 for _, _, v in rows) and any(v > 0 for _, _, v in rows)
    half = BAR_WIDTH // 2
    top = max(abs(v) for _, _, v in rows)
    for name, bar, value in rows:
        left, right = bar.split("|")
        assert len(left) == len(right) == half
        against, pro = left.count("▒"), right.count("█")
        if value < 0:
            assert pro == 0 and against == round(half * abs(value) / top) and left.endswith("▒" * against), name
        else:
            assert against == 0 and pro == round(half * value / top) and right.startswith("█" * pro), name


def test_signed_image_lists_the_patches_against_on_the_same_scale(tiny_handle) -> None:
    from rollout_core.explain import explain_image

    image = (np.random.default_rng(3).random((32, 32, 3)) * 255).astype(np.uint8)
    e = explain_image(tiny_handle("vit"), image, method="grad_x_input")
    shown = render_image(e)
    grid = e.score_map()
    assert "strongest patches against:" in shown and "- against" in shown
    listed = re.findall(r"^patch (\d+),(\d+)\s+(\S+)\s+([-+]\d\.\d{4})$", shown, flags=re.M)
    values = [grid[int(r), int(c)] for r, c, _, _ in listed]
    assert [float(v) for *_, v in listed] == pytest.approx(values, abs=1e-4)
    against = [v for v in values if v < 0]
    assert against and min(against) == pytest.approx(grid.min())  # the strongest patch against is listed
    top = max(abs(v) for v in values)
    for (_, _, bar, _), value in zip(listed, values):
        assert bar.count("▒" if value < 0 else "█") == round(BAR_WIDTH // 2 * abs(value) / top)
