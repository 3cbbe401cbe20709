"""Figures drawn from hand-built explanations: escaping, colours, hover values, orientation, shared scales."""
from __future__ import annotations

import base64
import io
import json
import os
import re
import shutil
from html.parser import HTMLParser

import numpy as np
import pytest
from PIL import Image

from explanations import make_explanation
from rollout_core import figures as F
from rollout_core.figures import layer_views
from rollout_core.summary import summarize
from rollout_core.figures import export
from rollout_core.errors import InputError, RolloutError
from rollout_core.explanation import Prediction


def _text_expl(tokens, offsets, scores, text, *, special=None, heads=2, method="rollout"):
    n = len(tokens)
    special = np.array([t.startswith("[") and t.endswith("]") for t in tokens]) if special is None else special
    rng = np.random.default_rng(1)
    attn = rng.random((2, n, n))
    attn /= attn.sum(-1, keepdims=True)
    scores = np.asarray(scores, dtype=np.float64)
    return make_explanation(
        tokens, scores, method=method, model_name="hand", special=np.asarray(special),
        layer_scores=np.stack([scores[::-1], scores]), layer_attention_scores=attn[:, 0], matrix=attn[1],
        layer_attention=attn, settings={"head_fusion": "mean", "model_heads": heads},
        prediction=[Prediction("NEGATIVE", 0.9, 0)], text=text, offsets=list(offsets),
        head_attention=rng.random((2, heads, n, n)),
    )


def _image_expl(values: np.ndarray, image: np.ndarray | None = None):
    rows, cols = values.shape
    n = rows * cols + 1
    scores = np.concatenate([[0.5], values.ravel()])
    if image is None:
        image = np.broadcast_to(np.array([200, 50, 10], np.uint8), (rows * 10, cols * 10, 3)).copy()
    return make_explanation(scores=scores, grid=(rows, cols), model_name="hand", layer_attention=np.eye(n)[None],
                            image=image)


class _Collect(HTMLParser):
    def __init__(self):
        super().__init__()
        self.tags, self.text, self.spans = [], [], []

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)
        if tag == "span" and ("class", "tok") in attrs:
            self.spans.append(dict(attrs))

    def handle_data(self, data):
        self.text.append(data)


def _parse(markup: str) -> _Collect:
    parser = _Collect()
    parser.feed(markup)
    return parser


def _words(text):
    spans = [(m.start(), m.end()) for m in re.finditer(r"\S+", text)]
    return [text[s:e] for s, e in spans], spans


def _luminance(rgb):
    lin = [(c / 255 / 12.92) if c / 255 <= 0.03928 else ((c / 255 + 0.055) / 1.055) ** 2.4 for c in rgb]
    return 0.2126 * lin[0] + 0.7152 * lin[1] + 0.0722 * lin[2]


def _background(span):
    return tuple(int(v) for v in re.search(r"background:rgb\((\d+), (\d+), (\d+)\)", span["style"]).groups())


def test_markup_in_the_text_is_shown_escaped_never_as_a_tag():
    text = 'nice <img src=x onerror=alert(1)> "quoted"'
    words, spans = _words(text)
    expl = _text_expl(["[CLS]", *words, "[SEP]"], [(0, 0), *spans, (0, 0)], np.full(len(words) + 2, 0.1), text)
    markup = F.token_highlight_html(expl, show_special=True)
    parsed = _parse(markup)
    assert set(parsed.tags) <= {"div", "span"}  # no <img> element anywhere
    assert "<img" not in markup and "&lt;img" in markup
    assert "".join(parsed.text).startswith(f"[CLS] {text} [SEP]")  # the user sees the characters they typed
    assert all('"' not in s["title"] or s["title"].count('"') == 2 for s in parsed.spans)  # quotes escaped in attrs


def test_original_text_spans_are_drawn_not_wordpieces():
    text = "Unbelievable, she said."
    tokens = ["[CLS]", "un", "##bel", "##ievable", ",", "she", "said", ".", "[SEP]"]
    offsets = [(0, 0), (0, 2), (2, 5), (5, 12), (12, 13), (14, 17), (18, 22), (22, 23), (0, 0)]
    expl = _text_expl(tokens, offsets, np.linspace(0.05, 0.2, 9), text)
    parsed = _parse(F.token_highlight_html(expl))
    assert [s["title"].split(":")[0] for s in parsed.spans] == ["Un", "bel", "ievable", ",", "she", "said", "."]
    assert "".join(parsed.text).split("0")[0].startswith(text)  # the legend follows the text
    word_level = _parse(F.token_highlight_html(expl, level="word"))
    assert [s["title"].split(":")[0] for s in word_level.spans] == ["Unbelievable", ",", "she", "said", "."]
    with_special = "".join(_parse(F.token_highlight_html(expl, level="word", show_special=True)).text)
    assert with_special.startswith(f"[CLS] {text} [SEP]")


def test_colour_is_monotone_in_score_and_hover_values_are_exact():
    text = "a b c d e f"
    words, spans = _words(text)
    raw = np.array([0.3, 0.01, 0.02, 0.05, 0.09, 0.14, 0.2, 0.4])  # [CLS], six words, [SEP]
    expl = _text_expl(["[CLS]", *words, "[SEP]"], [(0, 0), *spans, (0, 0)], raw, text)
    spans_html = _parse(F.token_highlight_html(expl)).spans
    shown = raw[1:-1] / raw[1:-1].sum()
    lum = [_luminance(_background(s)) for s in spans_html]
    assert all(x > y for x, y in zip(lum, lum[1:]))  # darker as the share grows
    for span, value in zip(spans_html, shown):
        assert f": {value:.6g} (" in span["title"]
        assert float(span["data-score"]) == pytest.approx(value, rel=1e-12)
    # text colour: black on light, white on dark backgrounds
    inks = [re.search(r"color:(#\w+)", s["style"]).group(1) for s in spans_html]
    assert inks[0] == "#000000" and inks[-1] == "#ffffff"


@pytest.mark.parametrize("scale", [*F.COLORMAPS, F.SCORE_SCALE, F.DIFFERENCE_SCALE])
def test_highlight_colours_are_the_ones_plotly_draws(scale: str):
    # Independent reference: Plotly's own sampler of the named scale, value by value.
    from plotly.colors import sample_colorscale

    from rollout_core.figures._common import colours_at

    values = np.concatenate([[-0.5, 0.0, 1.0, 2.0], np.random.default_rng(1).random(50)])
    expected = [tuple(int(round(255 * c)) for c in rgb)
                for rgb in sample_colorscale(scale, list(np.clip(values / 1.0, 0, 1)), colortype="tuple")]
    assert colours_at(scale, values, 0.0, 1.0) == expected
    assert colours_at(scale, values * 4, 0.0, 4.0) == expected  # zmin..zmax maps onto the scale


def test_bar_chart_values_layers_and_raw_attention():
    text = "x y z"
    words, spans = _words(text)
    expl = _text_expl(["[CLS]", *words, "[SEP]"], [(0, 0), *spans, (0, 0)], [0.5, 0.1, 0.3, 0.05, 0.05], text)
    views = [(None, False, expl.scores), (0, False, expl.layer_scores[0]), (1, True, expl.layer_attention_scores[1])]
    for layer, raw, row in views:
        bar = F.score_bar(expl, layer=layer, raw_attention=raw).data[0]
        expected = np.asarray(row)[1:-1] / np.asarray(row)[1:-1].sum()
        np.testing.assert_allclose(bar.y, expected, rtol=1e-12)
        assert list(bar.customdata) == words and "%{y:.6g}" in bar.hovertemplate
    with pytest.raises(InputError):
        F.score_bar(expl, layer=5)


def test_matrix_rows_are_queries_and_specials_hide_or_grey():
    text = "p q"
    tokens = ["[CLS]", "p", "q", "[SEP]"]
    expl = _text_expl(tokens, [(0, 0), (0, 1), (2, 3), (0, 0)], [0.4, 0.3, 0.2, 0.1], text)
    expl.matrix = np.arange(16, dtype=float).reshape(4, 4) / 16  # M[i, j] distinct
    fig = F.matrix_heatmap(expl, specials="show")
    z = np.asarray(fig.data[0].z, dtype=float)
    np.testing.assert_allclose(z, expl.matrix, rtol=1e-6)
    assert list(fig.data[0].y) == tokens and list(fig.data[0].x) == tokens  # z[i][j]: output y[i], input x[j]
    assert "output %{y}" in fig.data[0].hovertemplate and "input %{x}" in fig.data[0].hovertemplate
    repeated = _text_expl(["[CLS]", "p", "p", "[SEP]"], [(0, 0), (0, 1), (2, 3), (0, 0)], [0.4, 0.3, 0.2, 0.1], "p p")
    assert list(F.matrix_heatmap(repeated, specials="hide").data[0].x) == ["p", "p (2)"]  # one slot per position
    assert fig.layout.yaxis.autorange == "reversed" and "query" in fig.layout.yaxis.title.text
    hidden = F.matrix_heatmap(expl, specials="hide")
    np.testing.assert_allclose(np.asarray(hidden.data[0].z, dtype=float), expl.matrix[1:3, 1:3], rtol=1e-6)
    grey = F.matrix_heatmap(expl, specials="grey")
    main, greyed = (np.asarray(t.z, dtype=float) for t in grey.data)
    assert np.isnan(main[0]).all() and np.isnan(main[:, 3]).all()
    np.testing.assert_allclose(main[1:3, 1:3], expl.matrix[1:3, 1:3], rtol=1e-6)
    np.testing.assert_allclose(greyed[0], expl.matrix[0], rtol=1e-6)
    assert grey.data[0].zmax == pytest.approx(expl.matrix[1:3, 1:3].max())  # scale not eaten by specials


def test_head_grid_one_trace_per_head_on_one_scale_and_single_head():
    text = "p q"
    expl = _text_expl(["[CLS]", "p", "q", "[SEP]"], [(0, 0), (0, 1), (2, 3), (0, 0)], [0.4, 0.3, 0.2, 0.1], text,
                      heads=3)
    fig = F.head_grid(expl, 1, specials="show")
    assert len(fig.data) == 3 and all(t.coloraxis == "coloraxis" for t in fig.data)
    for h in range(3):
        np.testing.assert_allclose(np.asarray(fig.data[h].z, dtype=float), expl.head_attention[1, h], rtol=1e-6)
    assert fig.layout.coloraxis.cmax == pytest.approx(expl.head_attention[1].max())
    one = F.matrix_heatmap(expl, layer=1, head=2, specials="show")
    np.testing.assert_allclose(np.asarray(one.data[0].z, dtype=float), expl.head_attention[1, 2], rtol=1e-6)
    expl.head_attention = None
    with pytest.raises(InputError, match="keep_heads"):
        F.head_grid(expl, 0)


def _top_right():
    values = np.full((3, 4), 0.01)
    values[0, 3] = 1.0
    return _image_expl(values / values.sum())


def test_hot_patch_at_row_0_last_column_is_drawn_top_right():
    expl = _top_right()
    grid = F.patch_heatmap(expl)
    z = np.asarray(grid.data[0].z, dtype=float)
    assert np.unravel_index(z.argmax(), z.shape) == (0, 3) and grid.layout.yaxis.autorange == "reversed"
    overlay = F.image_overlay(expl, opacity=0.7)
    cells = overlay.data[-1]
    assert cells.x0 + 3 * cells.dx > 30 and cells.y0 < 15  # column 3 right of the middle, row 0 above it
    assert overlay.layout.yaxis.range[0] > overlay.layout.yaxis.range[1]  # y grows downwards, like the image
    for fig in (grid, overlay):  # pixels: the hot colour sits in the top-right block of the raster
        pixels = np.asarray(Image.open(io.BytesIO(F.raster_png(fig))).convert("RGB"), dtype=float)
        h, w = pixels.shape[:2]
        bright = pixels.sum(-1)
        r, c = np.unravel_index(bright.argmax(), bright.shape)
        assert r < h / 3 and c >= 3 * w / 4


def test_overlay_opacity_colormap_and_exact_patch_values():
    expl = _top_right()
    fig = F.image_overlay(expl, opacity=0.3, colormap="gray")
    cells = fig.data[-1]
    assert cells.opacity == 0.3 and cells.colorscale[0][1].lower().startswith(("rgb(0", "#000"))
    np.testing.assert_allclose(np.asarray(cells.z, dtype=float), expl.score_map())
    assert "%{z:.6g}" in cells.hovertemplate
    payload = base64.b64decode(fig.data[0].source.split(",", 1)[1])
    with Image.open(io.BytesIO(payload)) as drawn:
        assert drawn.mode == "RGB"
        np.testing.assert_array_equal(np.asarray(drawn), expl.image)  # same pixels, channels not swapped


def test_comparison_shares_one_scale_and_difference_is_centred():
    a_vals = np.array([[0.1, 0.2], [0.3, 0.4]])
    b_vals = np.array([[0.7, 0.1], [0.1, 0.1]])
    a, b = _image_expl(a_vals), _image_expl(b_vals)
    fig = F.comparison_figure(a, b)
    assert fig.layout.coloraxis.cmin == 0 and fig.layout.coloraxis.cmax == pytest.approx(0.7)
    assert {t.coloraxis for t in fig.data} == {"coloraxis"}
    fixed = F.comparison_figure(a, b, zmax=2.0)
    assert fixed.layout.coloraxis.cmax == 2.0
    diff = F.difference_figure(a, b)
    np.testing.assert_allclose(np.asarray(diff.data[0].z, dtype=float), a_vals - b_vals)
    assert diff.data[0].zmin == -diff.data[0].zmax == pytest.approx(-0.6)
    text = "p q r"
    words, spans = _words(text)
    ta = _text_expl(["[CLS]", *words, "[SEP]"], [(0, 0), *spans, (0, 0)], [0.5, 0.1, 0.2, 0.1, 0.1], text)
    tb = _text_expl(["[CLS]", *words, "[SEP]"], [(0, 0), *spans, (0, 0)], [0.2, 0.6, 0.1, 0.05, 0.05], text)
    heat = F.comparison_figure(ta, tb).data[0]
    np.testing.assert_allclose(np.asarray(heat.z, dtype=float), [[0.25, 0.5, 0.25], [0.8, 0.1 / 0.75, 0.05 / 0.75]])
    assert heat.zmin == 0 and heat.zmax == pytest.approx(0.8)
    assert F.shared_zmax(ta, tb) == pytest.approx(0.8)


def test_shared_zmax_is_honoured_by_the_highlight():
    text = "p q"
    expl = _text_expl(["[CLS]", "p", "q", "[SEP]"], [(0, 0), (0, 1), (2, 3), (0, 0)], [0.4, 0.3, 0.1, 0.2], text)
    own = _parse(F.token_highlight_html(expl)).spans
    shared = _parse(F.token_highlight_html(expl, zmax=2.0)).spans
    # 0.75 sits on its own scale (0 to 1: two words, never below twice the uniform share), not on 0..2
    assert _background(own[0]) != _background(shared[0])
    assert "<span>2</span>" in F.token_highlight_html(expl, zmax=2.0)  # legend shows the shared maximum


def test_marker_names_the_view_escaped():
    text = "p q"
    expl = _text_expl(["[CLS]", "p", "q", "[SEP]"], [(0, 0), (0, 1), (2, 3), (0, 0)], [0.4, 0.3, 0.1, 0.2], text)
    assert 'class="token-highlight" data-view=""' in F.token_highlight_html(expl)
    marked = F.token_highlight_html(expl, marker='layer-2-"cum"<')
    assert 'data-view="layer-2-&quot;cum&quot;&lt;"' in marked and '"cum"<' not in marked


def test_difference_draws_a_given_comparison_as_is():
    text = "p q r"
    words, spans = _words(text)
    ta = _text_expl(["[CLS]", *words, "[SEP]"], [(0, 0), *spans, (0, 0)], [0.5, 0.1, 0.2, 0.1, 0.1], text)
    tb = _text_expl(["[CLS]", *words, "[SEP]"], [(0, 0), *spans, (0, 0)], [0.2, 0.6, 0.1, 0.05, 0.05], text)
    from rollout_core import compare

    given = compare.compare(ta, tb, scores_a=ta.layer_scores[0], scores_b=tb.layer_scores[0])
    bar = F.difference_figure(ta, tb, comparison=given).data[0]
    np.testing.assert_allclose(bar.y, np.asarray(given.a) - np.asarray(given.b), rtol=1e-12)
    final = F.difference_figure(ta, tb).data[0]  # without it, the final rows: a different difference
    np.testing.assert_allclose(final.y, [0.25 - 0.8, 0.5 - 0.1 / 0.75, 0.25 - 0.05 / 0.75], rtol=1e-12)
    assert not np.allclose(bar.y, final.y)


def test_curves_one_line_per_method_and_a_dashed_random_baseline():
    x = [0.0, 0.5, 1.0]
    fig = F.curves_figure({"rollout": (x, [1, 0.4, 0.1]), "flow": (x, [1, 0.6, 0.2])}, random=(x, [1, 0.7, 0.3]),
                          aucs={"rollout": 0.475})
    assert [t.name for t in fig.data] == ["rollout (AUC 0.475)", "flow", "random"]
    assert fig.data[-1].line.dash == "dash"
    np.testing.assert_array_equal(fig.data[1].y, [1, 0.6, 0.2])


@pytest.mark.slow
@pytest.mark.skipif(not (shutil.which("chromium") or os.environ.get("BROWSER_PATH")), reason="no Chromium")
def test_png_export_through_kaleido_gives_a_decodable_png_of_the_asked_size():
    data = F.figure_png(F.patch_heatmap(_top_right()), width=300, height=240, scale=1, fallback=False)
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    with Image.open(io.BytesIO(data)) as image:
        assert image.size == (300, 240)  # kaleido's page size, not the fallback raster's


def test_png_export_page_loads_no_script_from_the_network():
    """An offline server must not wait on a CDN: kaleido's page, built from our options, has only local scripts."""
    import kaleido

    opts = export.kaleido_options()
    page = kaleido.PageGenerator(mathjax=opts["mathjax"]).generate_index()
    scripts = re.findall(r'<script[^>]*src="([^"]+)"', page)
    assert scripts and all(src.startswith("file://") for src in scripts), scripts
    assert 0 < opts["timeout"] < 90  # bounded below a browser's patience for a download


def test_fallback_bar_chart_draws_each_bar_at_its_height_in_its_colour():
    """Without kaleido the bar-chart download still works: bar heights in proportion, a zero bar empty."""
    import plotly.graph_objects as go

    fig = go.Figure(go.Bar(y=[0.5, 0.0, 0.25],
                           marker=dict(color=[0.5, 0.0, 0.25], colorscale="Viridis", cmin=0, cmax=0.5)))
    with Image.open(io.BytesIO(F.raster_png(fig))) as image:
        pixels = np.asarray(image.convert("RGB"), dtype=np.int64)
    height, width, _ = pixels.shape
    centres = [int((k + 0.5) * width / 3) for k in range(3)]
    filled = [int((pixels[:, c] != 255).any(-1).sum()) for c in centres]
    assert filled[0] == height and filled[1] == 0 and abs(filled[2] - height / 2) <= 1
    assert tuple(pixels[-1, centres[0]]) == (253, 231, 37)  # Viridis at the top of the scale
    assert np.abs(pixels[-1, centres[2]] - (33, 145, 140)).max() <= 2  # Viridis at its middle (matplotlib's 0.5)


def test_png_export_that_never_answers_falls_back_in_bounded_time(monkeypatch):
    """A kaleido call that hangs (a browser start that never answers) must not hang the download."""
    import time

    import kaleido
    import plotly.graph_objects as go

    monkeypatch.setattr(export, "KALEIDO_TIMEOUT_S", 0.5)
    monkeypatch.setattr(kaleido, "calc_fig_sync", lambda *a, **k: time.sleep(3))
    start = time.monotonic()
    data = F.figure_png(go.Figure(go.Bar(y=[1.0, 2.0])))
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and time.monotonic() - start < 2.5


def test_fallback_png_is_valid_and_other_figures_say_they_need_kaleido():
    expl = _text_expl(["[CLS]", "p", "[SEP]"], [(0, 0), (0, 1), (0, 0)], [0.5, 0.3, 0.2], "p")
    data = F.raster_png(F.matrix_heatmap(expl))
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    with Image.open(io.BytesIO(data)) as image:
        assert image.size[0] > 0 and image.size[1] > 0
    with pytest.raises(RolloutError, match="kaleido"):
        F.raster_png(F.curves_figure({"m": ([0, 1], [1, 0])}))


@pytest.mark.parametrize("lead", ["=", "+", "-", "@", "\t", "\r"])
def test_csv_guards_every_formula_start(lead):
    """OWASP's CSV-injection starts, tab and carriage return included, get the apostrophe; plain text does not."""
    import csv

    token = lead + "HYPERLINK(1)"
    expl = _text_expl(["[CLS]", token, "q", "[SEP]"], [(0, 0), (0, 13), (14, 15), (0, 0)], [0.4, 0.3, 0.1, 0.2],
                      token + " q")
    rows = list(csv.reader(io.StringIO(F.scores_csv(expl).decode("utf-8"), newline="")))
    tokens = [row[rows[0].index("token")] for row in rows[1:]]
    assert tokens == ["[CLS]", "'" + token, "q", "[SEP]"]


def test_csv_and_json_downloads_carry_the_scores():
    text = "=cmd q"
    expl = _text_expl(["[CLS]", "=cmd", "q", "[SEP]"], [(0, 0), (0, 4), (5, 6), (0, 0)], [0.4, 0.3, 0.1, 0.2], text)
    import pandas as pd

    frame = pd.read_csv(io.BytesIO(F.scores_csv(expl)))
    assert list(frame["token"]) == ["[CLS]", "'=cmd", "q", "[SEP]"]  # no formula for a spreadsheet
    np.testing.assert_allclose(frame["display_score"][1:3], [0.75, 0.25])
    assert frame["display_score"][[0, 3]].isna().all()
    np.testing.assert_allclose(frame["rollout_after_layer_1"], expl.layer_scores[0], rtol=1e-8)
    out = json.loads(F.scores_json(expl))
    assert out["display_scores"] == [0.75, 0.25] and out["text"] == text


# --- on explanations of tiny random-weight models (real tokenizers, offsets and image processors) ---

SENTENCE = 'The soup <img src=x onerror=alert(1)> was "cold", unbelievably.'


@pytest.mark.parametrize("kind", ["bert", "roberta"])
def test_real_tokenizer_highlight_shows_the_original_text_escaped(tiny_handle, kind):
    from rollout_core import explain_text

    expl = explain_text(tiny_handle(kind), SENTENCE, keep_heads=True)
    markup = F.token_highlight_html(expl)
    parsed = _parse(markup)
    assert set(parsed.tags) <= {"div", "span"} and "<img" not in markup
    assert "".join(parsed.text).startswith(SENTENCE)  # the characters, not wordpieces or "Ġ" markers
    for fig in (F.score_bar(expl, level="word"), F.matrix_heatmap(expl), F.head_grid(expl, 0),
                F.matrix_heatmap(expl, layer=0, head=1), F.score_bar(expl, layer=0, raw_attention=True)):
        assert fig.data


def test_two_real_tokenizers_compare_per_word(tiny_handle):
    from rollout_core import explain_text

    a, b = (explain_text(tiny_handle(kind), SENTENCE) for kind in ("bert", "roberta"))
    fig = F.comparison_figure(a, b)
    words = [m.group() for m in re.finditer(r"\w+(?:'\w+)*|[^\w\s]", SENTENCE)]
    assert list(fig.data[0].customdata[0]) == words
    assert F.difference_figure(a, b).data[0].y.shape == (len(words),)


def test_non_square_real_grid_keeps_rows_as_image_rows(tiny_handle):
    from rollout_core import explain_image

    handle = tiny_handle("vit-wide")
    image = np.zeros((32, 48, 3), np.uint8)
    image[:16, 24:] = (255, 0, 0)  # top-right red quarter
    expl = explain_image(handle, image)
    rows, cols = expl.grid
    assert rows < cols  # 32 x 48 pixels: fewer patch rows than columns
    assert np.asarray(F.patch_heatmap(expl).data[0].z).shape == (rows, cols)
    overlay = F.image_overlay(expl)
    cells = overlay.data[-1]
    height, width = expl.image.shape[:2]
    assert cells.x0 - cells.dx / 2 == pytest.approx(-0.5)
    assert cells.x0 + (cols - 0.5) * cells.dx == pytest.approx(width - 0.5)
    assert cells.y0 - cells.dy / 2 == pytest.approx(-0.5)
    assert cells.y0 + (rows - 0.5) * cells.dy == pytest.approx(height - 0.5)
    drawn = np.asarray(Image.open(io.BytesIO(base64.b64decode(overlay.data[0].source.split(",", 1)[1]))))
    assert drawn[2, -3, 0] > 150 and drawn[2, -3, 2] < 100 and drawn[-3, 2].sum() < 200  # red stays top-right


_BIDI = ["\u202a", "\u202b", "\u202c", "\u202d", "\u202e", "\u2066", "\u2067", "\u2068", "\u2069", "\u200e", "\u200f",
         "\x07", "\u00ad", "\ufeff"]


@pytest.mark.parametrize("with_offsets", [True, False])
def test_bidi_and_control_characters_are_shown_as_codes_not_applied(with_offsets: bool):
    # U+202E (right-to-left override) would draw "evil" and everything after it backwards.
    text = "pay \u202eevil\u2066 <b>x</b> \u200fend"
    tokens = ["[CLS]", "pay", "\u202eevil\u2066", "<b>x</b>", "\u200fend", "[SEP]"]
    offsets = [(0, 0), (0, 3), (4, 10), (11, 19), (20, 24), (0, 0)]
    assert [text[a:b] for a, b in offsets[1:-1]] == tokens[1:-1]  # hand-checked offsets
    expl = _text_expl(tokens, offsets, [0.1, 0.2, 0.3, 0.2, 0.1, 0.1], text if with_offsets else None)
    if not with_offsets:
        expl.offsets = None
    markup = F.token_highlight_html(expl, show_special=True)
    assert not any(char in markup for char in _BIDI)
    assert "<b>" not in markup and "&lt;b&gt;x&lt;/b&gt;" in markup
    parsed = _parse(markup)
    assert len(parsed.spans) == 4
    shown = "".join(parsed.text)
    for visible in ["pay", "\\u202eevil\\u2066", "\\u200fend"]:
        assert visible in shown
    assert parsed.spans[1]["title"].startswith("\\u202eevil\\u2066:")


def test_visible_escape_keeps_newlines_tabs_and_joiners():
    assert F.text.escape_visible("a\nb\tc\u200dd") == "a\nb\tc\u200dd"
    assert F.text.escape_visible("\U000e0001") == \
        '<span class="ctrl-char" style="font-family:monospace;opacity:0.7">\\U000e0001</span>'


def _strings(value) -> list[str]:
    """Every string in a figure's data and layout (tick labels, categories, hover data, titles)."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for v in value.values() for s in _strings(v)]
    if isinstance(value, (list, tuple, np.ndarray)):
        return [s for v in value for s in _strings(v)]
    return []


def test_bidi_and_control_characters_in_chart_labels_are_shown_as_codes():
    text = "pay \u202eevil\u2066 now \u200fend"
    tokens = ["[CLS]", "pay", "\u202eevil\u2066", "now", "\u200fend", "\x07", "[SEP]"]
    offsets = [(0, 0), (0, 3), (4, 10), (11, 14), (15, 19), (0, 0), (0, 0)]
    expl = _text_expl(tokens, offsets, [0.1, 0.2, 0.3, 0.2, 0.1, 0.05, 0.05], text)
    figs = {"bar": F.score_bar(expl), "words": F.score_bar(expl, level="word"),
            "matrix": F.matrix_heatmap(expl, specials="grey"), "compare": F.comparison_figure(expl, expl),
            "difference": F.difference_figure(expl, expl)}
    for name, fig in figs.items():
        strings = _strings(fig.to_plotly_json())
        assert not [s for s in strings if any(c in s for c in _BIDI)], name
    bar_ticks = figs["bar"].layout.xaxis.ticktext
    assert "\\u202eevil\\u2066" in bar_ticks and "\\u200fend" in bar_ticks and "\\u0007" in bar_ticks
    matrix = figs["matrix"].data[0]
    assert "\\u202eevil\\u2066" in list(matrix.x) and "\\u202eevil\\u2066" in list(matrix.y)
    assert "\\u202e" in figs["words"].layout.xaxis.ticktext  # words split at the control characters


def _signed_expl():
    """AttnLRP-like: 'good' speaks for the class, 'not' against it (scores by hand, [CLS]/[SEP] left out)."""
    tokens = ["[CLS]", "not", "good", "film", "[SEP]"]
    offsets = [(0, 0), (0, 3), (4, 8), (9, 13), (0, 0)]
    expl = _text_expl(tokens, offsets, [0.5, -0.2, 0.6, 0.2, 0.1], "not good film", method="attnlrp")
    expl.settings["signed"] = True
    return expl


def test_signed_values_keep_their_signs_on_a_scale_centred_at_zero():
    expl = _signed_expl()
    np.testing.assert_allclose(expl.display_scores(), [-0.2, 0.6, 0.2])  # divided by 0.2 + 0.6 + 0.2 = 1.0
    bar = F.score_bar(expl)
    marker = bar.data[0].marker
    assert marker.cmin == -marker.cmax == pytest.approx(-0.6)  # centred at 0, sized by the largest |value|
    assert bar.layout.yaxis.range[0] < 0 and "against" in bar.layout.yaxis.title.text
    spans = _parse(F.token_highlight_html(expl)).spans
    red, blue = _background(spans[1]), _background(spans[0])  # 'good' for, 'not' against
    assert red[0] > red[2] and blue[2] > blue[0]
    assert "against" in spans[0]["title"]
    summary = summarize(expl)
    assert "'good' (+60%)" in summary and "'not' (−20%) against it" in summary and "20% of the evidence" in summary
    view = layer_views.text_payload(expl)["views"]["cumulative"][-1]
    assert view["bottoms"] == [-view["tops"][0]]


def test_a_flat_map_is_drawn_pale_not_stretched_to_the_darkest_colour():
    tokens = ["[CLS]", "a", "b", "c", "d", "[SEP]"]
    offsets = [(0, 0), (0, 1), (2, 3), (4, 5), (6, 7), (0, 0)]
    flat = _text_expl(tokens, offsets, [0.2, 0.16, 0.17, 0.16, 0.16, 0.15], "a b c d")
    bar = F.score_bar(flat)
    assert bar.data[0].marker.cmax == pytest.approx(2 / 4)  # twice the uniform share of 4 words, not 0.26


def test_a_whole_model_method_is_not_described_as_gradient_rollout():
    note = F.matrix_note(_signed_expl())
    assert note.startswith("AttnLRP (relevance propagation) gives one signed relevance per input token")
    assert "Gradient-weighted" not in note
    assert "Gradient-weighted rollout's matrix" in F.matrix_note(_text_expl(
        ["[CLS]", "a", "[SEP]"], [(0, 0), (0, 1), (0, 0)], [0.2, 0.6, 0.2], "a", method="gradient"))
