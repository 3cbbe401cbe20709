"""The plain-language summary: numbers recomputed here by hand, honest wording for weak maps."""
from __future__ import annotations

import re

import numpy as np

from explanations import make_explanation
from rollout_core.explanation import Prediction
from rollout_core.summary import summarize

TEXT = "the service was rude and the soup cold"


def _words_offsets(text):
    spans = [(m.start(), m.end()) for m in re.finditer(r"\S+", text)]
    return [text[s:e] for s, e in spans], spans


def _text(scores, *, method="rollout", target="NEGATIVE", description="row of [CLS]; class 'NEGATIVE' (predicted)",
          truncation=None, settings=None):
    words, spans = _words_offsets(TEXT)
    tokens = ["[CLS]", *words, "[SEP]"]
    n = len(tokens)
    scores = np.asarray(scores, dtype=float)
    return make_explanation(
        tokens, scores, method=method, special=np.array([True] + [False] * len(words) + [True]), layers=2,
        layer_scores=np.stack([np.full(n, 1 / n), scores]),
        settings={"head_fusion": "mean", "model_heads": 12, "start_layer": 0, "task": "text-classification",
                  **(settings or {})},
        target_description=description, prediction=[Prediction("NEGATIVE", 0.97, 0), Prediction("POSITIVE", 0.03, 1)],
        target=target, text=TEXT, offsets=[(0, 0), *spans, (0, 0)], truncation=truncation,
    )


#            [CLS]  the  service was  rude  and  the  soup  cold  [SEP]
PEAKED = [0.2, 0.02, 0.06, 0.02, 0.25, 0.02, 0.02, 0.05, 0.16, 0.2]


def test_top_words_and_their_shares_are_the_renormalised_scores():
    text = summarize(_text(PEAKED), top_k=2)
    shown = np.array(PEAKED[1:-1]) / sum(PEAKED[1:-1])  # 0.6 of the raw mass is shown
    rude, cold = shown[3], shown[7]
    assert f"'rude' ({100 * rude:.0f}%)" in text and f"'cold' ({100 * cold:.0f}%)" in text
    assert "'service'" not in text  # top_k=2
    assert f"together {100 * (rude + cold):.0f}%" in text and "NEGATIVE (97%)" in text
    assert "rests mostly on" in text  # 0.41 + 0.27 >= half
    assert "attention rollout through 2 layers, mean over 12 heads" in text and "read from the row of [CLS]" in text
    assert "Special tokens" not in text  # they took 40%, not most
    assert "class-agnostic" not in text  # the default, predicted class


def test_flat_map_says_so_with_the_uniform_share():
    flat = [0.1] + [0.1] * 8 + [0.1]
    flat[4] = 0.11
    text = summarize(_text(flat))
    assert "nearly flat" in text and "uniform share of 12%" in text and "1/8 words" in text
    assert "rests" not in text


def test_special_tokens_majority_is_reported_before_renormalisation():
    scores = [0.7, 0.01, 0.02, 0.01, 0.08, 0.01, 0.01, 0.02, 0.04, 0.1]
    text = summarize(_text(scores))
    assert "Special tokens took 80% of the raw mass before renormalisation" in text
    assert "remaining 20%" in text


def test_method_names_class_note_and_truncation():
    asked = _text(PEAKED, target="POSITIVE", description="row of [CLS]; class 'POSITIVE'")
    assert "class-agnostic" in summarize(asked) and "asked about class POSITIVE" in summarize(asked)
    gradient = summarize(_text(PEAKED, method="gradient", target="POSITIVE",
                               description="row of [CLS]; class 'POSITIVE'"))
    assert "gradient-weighted rollout (class-specific) for class POSITIVE" in gradient
    assert "class-agnostic" not in gradient
    assert "attention flow through 2 layers" in summarize(_text(PEAKED, method="flow"))
    assert "raw attention of layer 2" in summarize(_text(PEAKED, method="attention"))
    assert "raw attention of layer 1," in summarize(_text(PEAKED), layer=0, raw_attention=True)
    started = summarize(_text(PEAKED, settings={"start_layer": 3}))
    assert "through 2 layers (layers 4-5)" in started
    cut = summarize(_text(PEAKED, truncation={"kept_chars": 38, "total_chars": 900, "kept_tokens": 10}))
    assert "first 38 of 900 characters (10 tokens)" in cut


def test_slider_layer_summary_uses_that_layer():
    text = summarize(_text(PEAKED), layer=0)  # layer_scores[0] is uniform
    assert "nearly flat" in text and "through 1 layer," in text


def _image(values):
    rows, cols = values.shape
    n = rows * cols + 1
    scores = np.concatenate([[0.0], values.ravel()])
    return make_explanation(["[CLS]"] + ["p"] * (n - 1), scores, grid=(rows, cols),
                            settings={"head_fusion": "mean", "model_heads": 6})


def test_image_mass_location_and_top_decile():
    values = np.full((10, 10), 0.1)
    values[:3, :3] = 5.0  # top-left corner
    text = summarize(_image(values))
    total = values.sum()
    top10 = np.sort(values.ravel())[::-1][:10].sum() / total
    top_left = values[:5, :5].sum() / total
    assert "top-left quarter" in text and f"({100 * top_left:.0f}%)" in text
    assert f"top 10% of the 10x10 patches (10) hold {100 * top10:.0f}% of the mass" in text
    assert "peaks at patch (row 0, col 0)" in text and "no classifier" in text


def test_image_peak_is_named_0_based_as_on_the_axes():
    values = np.full((4, 6), 0.01)
    values[2, 5] = 1.0  # third row from the top, last (sixth) column: (row 2, col 5) counting from 0
    text = summarize(_image(values))
    assert "peaks at patch (row 2, col 5)" in text
    assert "row 3" not in text and "col 6" not in text


def test_image_flat_and_odd_grid_quarters():
    assert "nearly flat" in summarize(_image(np.ones((5, 5))))
    values = np.zeros((3, 3))
    values[1, 1] = 1.0  # the centre patch: a quarter in each quarter
    values[0, 2] = 0.2
    text = summarize(_image(values))
    total = values.sum()
    top_right = (0.25 * values[1, 1] + values[0, 2]) / total
    assert f"no quarter stands out (the largest, top-right, holds {100 * top_right:.0f}%)" in text  # 38% < 40%


def test_one_layer_wording_follows_the_single_layer_flag_not_the_name(monkeypatch):
    """The summary reads the registry's single_layer fact: a spec flagged so is worded as one layer whatever its
    name, and the flag cleared on "attention" gives it no such wording."""
    import dataclasses

    from rollout_core import methods, summary

    flagged = {"rollout": dataclasses.replace(methods.get("rollout"), single_layer=True),
               "attention": dataclasses.replace(methods.get("attention"), single_layer=False)}
    monkeypatch.setattr(summary, "_spec", lambda name: flagged.get(name, methods.get(name)))
    assert "raw attention of layer 2, mean over 12 heads" in summarize(_text(PEAKED, method="rollout"))
    assert "raw attention of layer" not in summarize(_text(PEAKED, method="attention"))
    assert methods.get("attention").single_layer
    assert [s.name for s in methods.all_methods() if s.single_layer] == ["attention"]


def test_a_signed_map_is_summarised_by_its_positive_evidence_and_no_share_exceeds_100_percent():
    """AttnLRP-like relevance: negatives let the renormalised shares pass 100% (the star shot said '243% of the
    mass'); the summary speaks of the positive part, whose shares are worked out here by hand."""
    from test_figures import _image_expl

    values = np.zeros((4, 4))
    values[3, 3], values[3, 2], values[0, 0] = 1.2, 0.4, -0.6  # positive part 1.6: peak 1.2 / 1.6 = 75%
    text = summarize(_image_expl(values))
    percents = [float(p) for p in re.findall(r"(\d+(?:\.\d+)?)%", text)]
    assert percents and max(percents) <= 100, text
    assert "positive relevance" in text and "(row 3, col 3) (75%)" in text
    assert "bottom-right quarter holds the most (100%)" in text
