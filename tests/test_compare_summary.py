"""Word alignment, agreement figures and plain-language summaries on hand-built explanations."""
import numpy as np
import pytest

from explanations import make_explanation
from rollout_core.compare import agreement, compare, spearman, top_k_overlap, word_scores
from rollout_core.explanation import Prediction
from rollout_core.summary import summarise

TEXT = "unbelievably rude staff"


def text_expl(tokens, offsets, scores, *, method="rollout", target=None, prediction=("NEGATIVE", 0.9)):
    return make_explanation(
        tokens, scores, method=method, special=np.array([t in ("[CLS]", "[SEP]") for t in tokens]),
        settings={"head_fusion": "mean", "model_heads": 4, "start_layer": 0, "task": "text-classification"},
        prediction=[Prediction(prediction[0], prediction[1], 0)], target=target, text=TEXT, offsets=offsets,
    )


# tokenizer A: unbeliev ##ably rude staff ; tokenizer B: un ##believably rude st ##aff
A = text_expl(["[CLS]", "unbeliev", "##ably", "rude", "staff", "[SEP]"],
              [(0, 0), (0, 8), (8, 12), (13, 17), (18, 23), (0, 0)], [0.5, 0.1, 0.1, 0.2, 0.1, 0.0])
B = text_expl(["[CLS]", "un", "##believably", "rude", "st", "##aff", "[SEP]"],
              [(0, 0), (0, 2), (2, 12), (13, 17), (18, 20), (20, 23), (0, 0)], [0.2, 0.05, 0.05, 0.6, 0.05, 0.05, 0.0])


def test_word_scores_sum_subwords_into_the_same_words():
    wa, wb = word_scores(A), word_scores(B)
    assert [w for w, *_ in wa] == [w for w, *_ in wb] == ["unbelievably", "rude", "staff"]
    # A shown scores 0.1,0.1,0.2,0.1 -> /0.5 -> words 0.4, 0.4, 0.2
    assert np.allclose([v for *_, v in wa], [0.4, 0.4, 0.2])
    # B shown 0.05,0.05,0.6,0.05,0.05 -> /0.8 -> 0.125, 0.75, 0.125
    assert np.allclose([v for *_, v in wb], [0.125, 0.75, 0.125])


def test_compare_aligns_different_tokenizers_by_words():
    result = compare(A, B)
    assert result.aligned_by_words and "words" in result.note
    assert result.units == ["unbelievably", "rude", "staff"]
    # ranks A: (tie 0.4,0.4), 0.2 -> average ranks 2.5, 2.5, 1 ; B: 2, 3, 2 -> hand Spearman = Pearson of ranks
    ra, rb = np.array([2.5, 2.5, 1.0]), np.array([1.5, 3.0, 1.5])
    assert result.spearman == pytest.approx(np.corrcoef(ra, rb)[0, 1])


def test_same_tokenizer_compares_tokens_directly():
    other = text_expl(A.tokens, A.offsets, [0.5, 0.4, 0.3, 0.2, 0.1, 0.0], method="flow")
    result = compare(A, other)
    assert not result.aligned_by_words and result.units == ["unbeliev", "##ably", "rude", "staff"]
    assert len(result.a) == 4


def test_spearman_and_overlap_by_hand():
    assert spearman(np.array([1, 2, 3]), np.array([3, 2, 1]))[0] == pytest.approx(-1.0)
    value, note = spearman(np.array([1.0, 1.0, 1.0]), np.array([1, 2, 3]))
    assert np.isnan(value) and "same score" in note
    assert top_k_overlap(np.array([0.9, 0.8, 0.1, 0.0]), np.array([0.0, 0.8, 0.9, 0.1]), 2) == 0.5
    figures = agreement(A, B)
    assert set(figures) >= {"spearman", "top_1_overlap", "top_3_overlap", "top_5_overlap"}
    assert figures["top_3_overlap"] == 1.0  # only 3 words: every word is in both top-3


def test_image_grids_of_different_size_are_resampled():
    def image_expl(grid, hot):
        rows, cols = grid
        n = 1 + rows * cols
        scores = np.full(n, 0.01)
        scores[0] = 0.0
        scores[1 + hot] = 1.0
        return make_explanation(["[CLS]"] + ["p"] * (n - 1), scores, grid=grid)
    result = compare(image_expl((2, 2), 1), image_expl((4, 4), 3))  # both hot in the top-right
    assert "resampled" in result.note and len(result.units) == 16
    assert int(np.argmax(result.a)) == int(np.argmax(result.b)) == 3


def test_summary_numbers_come_from_the_scores():
    text = summarise(B)
    assert "'rude' (75%)" in text and "NEGATIVE (90%)" in text and "uniform share 33%" in text
    assert "rests mostly on" in text


def test_summary_says_when_the_map_is_flat_and_when_specials_dominate():
    flat = text_expl(A.tokens, A.offsets, [0.9, 0.026, 0.024, 0.025, 0.025, 0.0])
    text = summarise(flat)
    assert "nearly flat" in text and "uniform share of 33%" in text and "Special tokens took 90%" in text


def test_summary_warns_that_rollout_is_class_agnostic_only_when_a_class_is_asked():
    assert "class-agnostic" in summarise(text_expl(A.tokens, A.offsets, A.scores, target="POSITIVE"))
    default = text_expl(A.tokens, A.offsets, A.scores, target="NEGATIVE")
    default.target_description = "row of [CLS]; class 'NEGATIVE' (predicted)"  # what explain writes by default
    assert "class-agnostic" not in summarise(default)
    gradient = summarise(text_expl(A.tokens, A.offsets, A.scores, method="gradient", target="POSITIVE"))
    assert "class-specific" in gradient and "class-agnostic" not in gradient
