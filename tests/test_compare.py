"""Word aggregation by character offsets, alignment across tokenizers, rank agreement by hand."""
from __future__ import annotations

import math

import numpy as np
import pytest

from explanations import make_explanation
from rollout_core.compare import agreement, align_words, compare, spearman, top_k_overlap, word_scores
from rollout_core.errors import InputError


SENTENCE = "The staff weren't friendly, honestly."


def _text(tokens, offsets, scores, text=SENTENCE):
    special = np.array([t.startswith("[") or t in ("<s>", "</s>") for t in tokens])
    return make_explanation(tokens, scores, special=special, text=text, offsets=offsets)


def _spans(text, pieces):
    """Offsets of consecutive pieces found left to right in text (an independent way to write offsets)."""
    out, cursor = [], 0
    for piece in pieces:
        start = text.index(piece, cursor)
        out.append((start, start + len(piece)))
        cursor = start + len(piece)
    return out


# WordPiece-like and byte-level-BPE-like cuts of the same sentence
WP = ["The", "st", "##aff", "weren", "'", "t", "friend", "##ly", ",", "honest", "##ly", "."]
BPE = ["The", "staff", "were", "n't", "friendly", ",", "hon", "est", "ly", "."]
WP_SCORES = [0.3, 0.05, 0.05, 0.1, 0.02, 0.08, 0.1, 0.1, 0.02, 0.04, 0.06, 0.02, 0.06]  # + [CLS] first
BPE_SCORES = [0.1, 0.2, 0.1, 0.1, 0.05, 0.25, 0.01, 0.03, 0.02, 0.04, 0.1]  # + <s> first


def _wp():
    return _text(["[CLS]", *WP, "[SEP]"], [(0, 0), *_spans(SENTENCE, [p.lstrip("#") for p in WP]), (0, 0)],
                 WP_SCORES + [0.0])


def _bpe():
    return _text(["<s>", *BPE], [(0, 0), *_spans(SENTENCE, BPE)], BPE_SCORES)


def test_two_tokenizations_give_the_same_words_with_summed_shares():
    wp, bpe = word_scores(_wp()), word_scores(_bpe())
    expected_words = ["The", "staff", "weren't", "friendly", ",", "honestly", "."]
    assert [w for w, *_ in wp] == [w for w, *_ in bpe] == expected_words
    assert [(s, e) for _, s, e, _ in wp] == [(s, e) for _, s, e, _ in bpe]
    shown = np.array(WP_SCORES[1:]) / sum(WP_SCORES[1:])  # by hand: pieces of each word added up
    by_hand = [shown[0], shown[1] + shown[2], shown[3] + shown[4] + shown[5], shown[6] + shown[7], shown[8],
               shown[9] + shown[10], shown[11]]
    np.testing.assert_allclose([v for *_, v in wp], by_hand)
    assert sum(v for *_, v in bpe) == pytest.approx(1.0)


def test_align_words_across_tokenizers_and_truncation():
    rows = align_words(_wp(), _bpe())
    assert [r[0] for r in rows] == ["The", "staff", "weren't", "friendly", ",", "honestly", "."]
    cut_text = SENTENCE[:17]  # "The staff weren't"
    cut = _text(["<s>", "The", "staff", "weren't"], [(0, 0), *_spans(cut_text, ["The", "staff", "weren't"])],
                [0.1, 0.2, 0.3, 0.4], text=cut_text)
    rows = align_words(_wp(), cut)
    assert [r[0] for r in rows] == ["The", "staff", "weren't"]
    np.testing.assert_allclose([r[4] for r in rows], [2 / 9, 3 / 9, 4 / 9])
    assert sum(r[3] for r in rows) == pytest.approx(1.0)
    with pytest.raises(InputError):
        align_words(_wp(), _text(["<s>", "Other"], [(0, 0), (0, 5)], [0.5, 0.5], text="Other"))


def test_spearman_against_a_hand_case_and_constant_maps():
    # ranks x: 1 2 3 4 5, y: 2 1 4 3 5 -> d^2 = 1+1+1+1+0 = 4, rho = 1 - 6*4/(5*24) = 0.8
    rho, note = spearman([0.1, 0.2, 0.3, 0.4, 0.5], [0.2, 0.1, 0.4, 0.3, 0.5])
    assert rho == pytest.approx(0.8) and not note
    rho, note = spearman([0.2, 0.2, 0.2], [0.1, 0.5, 0.4])
    assert math.isnan(rho) and "same score" in note
    rho, note = spearman([1.0], [2.0])
    assert math.isnan(rho) and note


def test_top_k_overlap_by_hand():
    x = [0.5, 0.1, 0.3, 0.05, 0.05]  # top-3: 0, 2, 1
    y = [0.1, 0.2, 0.6, 0.0, 0.1]  # top-3: 2, 1, 0 (tie 0/4 -> 0 first)
    assert top_k_overlap(x, y, 1) == 0.0
    assert top_k_overlap(x, y, 3) == 1.0
    assert top_k_overlap(x, y, 2) == 0.5
    assert top_k_overlap(x, y, 10) == 1.0  # k capped at the number of units


def test_agreement_reports_words_when_tokenizers_differ():
    result = agreement(_wp(), _bpe())
    assert result["tokenizers_differ"] and result["unit"] == "word" and result["units"] == 7
    a = [r[3] for r in align_words(_wp(), _bpe())]
    b = [r[4] for r in align_words(_wp(), _bpe())]
    assert result["spearman"] == pytest.approx(spearman(a, b)[0])
    assert set(result) >= {"top_1_overlap", "top_3_overlap", "top_5_overlap", "note"}
    same = agreement(_wp(), _wp())
    assert not same["tokenizers_differ"] and same["unit"] == "token" and same["spearman"] == pytest.approx(1.0)


def _image(values):
    rows, cols = values.shape
    return make_explanation([f"patch {i}" for i in range(rows * cols)], values.ravel(), grid=(rows, cols))


def test_images_on_different_grids_resample_the_coarser_map_and_say_so():
    coarse = _image(np.array([[1.0, 0.0], [0.0, 0.0]]))
    fine = _image(np.eye(4))
    result = compare(coarse, fine)
    assert len(result.units) == 16 and "resampled" in result.note and "(A)" in result.note
    np.testing.assert_allclose(result.b.reshape(4, 4), np.eye(4) / 4)  # the finer map is untouched
    assert result.a.sum() == pytest.approx(1.0)
    top_left = result.a.reshape(4, 4)[:2, :2].sum()
    assert top_left > 0.5  # the coarse map's mass stays where it was
