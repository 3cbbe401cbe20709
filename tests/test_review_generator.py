"""training.reviews, the generator default-text is trained on: seeded, balanced, versioned, and free of the
hand-written evaluation sentences (a copied sentence would make a validation or blind figure meaningless)."""
import re
from collections import Counter

import pytest

from rollout_core.data import sentiment_sets as sets
from training import reviews

V4_SHAPES = {"surface", "alone", "indirect_review", "turn_in_sentence"}


@pytest.fixture(scope="module")
def generated():
    return {version: reviews.generate(1200, seed=0, vader=True, version=version) for version in (3, 4, 5)}


def test_seeded_and_balanced(generated):
    again = reviews.generate(1200, seed=0, vader=True, version=4)
    assert [r.text for r in again] == [r.text for r in generated[4]]
    assert [r.text for r in reviews.generate(300, seed=1, version=4)] != [r.text for r in generated[4][:300]]
    for made in generated.values():
        targets = Counter(r.positive for r in made)
        assert targets[0.5] == round(1200 * 0.15)
        assert targets[1.0] == targets[0.0] == (1200 - targets[0.5]) // 2


def test_version_3_has_none_of_the_v4_pieces(generated):
    """Version 3 is the first round's generator (the default of training.train_text's older variants)."""
    assert not {r.shape for r in generated[3]} & V4_SHAPES
    v4_only = reviews.COMPARE_POS + reviews.COMPARE_NEG + reviews.WISH_POS + reviews.CONDUCT_POS
    fixed = [s for s in v4_only if "{" not in s]
    assert not any(s in r.text for r in generated[3] for s in fixed)
    assert V4_SHAPES <= {r.shape for r in generated[4]}
    assert any(s in r.text for r in generated[4] for s in fixed)


def test_every_slot_is_filled(generated):
    for made in generated.values():
        unfilled = [r.text for r in made if re.search(r"[{}]", r.text)]
        assert not unfilled, unfilled[:3]


def test_sincere_and_sarcastic_frames_both_occur_with_each_label(generated):
    """'Five stars for X' is praise with a good aspect and sarcasm with a bad event: the rest of the sentence,
    not the frame, decides."""
    five = [r for r in generated[4] if "five stars for" in r.text.lower()]
    assert {r.positive for r in five} == {0.0, 1.0}


def _sentences(text: str) -> list[str]:
    return [s.strip().lower() for s in re.split(r"(?<=[.!?])\s+", text) if len(s.split()) >= 5]


def test_no_hand_written_evaluation_sentence_is_generated(generated):
    hand_written = [e.text for e in sets.validation_reviews()[0]] + sets.validation_reviews()[1]
    hand_written += [e.text for e in sets.mixed_reviews(sets.REVIEWS_BLIND_CSV) + sets.mixed_reviews()]
    hand_written += [e.text for e in sets.natural(sets.NATURAL_CSV) + sets.natural(sets.NATURAL_BLIND_CSV)]
    hand_written += sets.neutral_sentences()
    theirs = {s.rstrip(".!?") for text in hand_written for s in _sentences(text)}
    ours = {s.rstrip(".!?") for made in generated.values() for r in made for s in _sentences(r.text)}
    assert len(theirs) > 200
    copied = theirs & ours
    assert not copied, sorted(copied)[:5]


def test_from_version_5_the_turn_marker_does_not_give_the_label_away():
    """In v3/v4 "Still," always led to a POSITIVE turn; from v5 each label-free marker leads both ways often, so
    the sentence after it has to decide."""
    def counts(version):
        made = reviews.generate(6000, seed=2, version=version)
        return Counter((r.positive, marker) for r in made if r.positive != 0.5
                       for marker in reviews.TURNS if f". {marker}" in r.text or r.text.startswith(marker))
    v4, v5 = counts(4), counts(5)
    assert v4[(1.0, "Still, ")] > 20 and v4[(0.0, "Still, ")] == 0
    for marker in reviews.TURNS:
        positive, negative = v5[(1.0, marker)], v5[(0.0, marker)]
        assert positive + negative >= 20 and min(positive, negative) >= 0.25 * (positive + negative), marker


def test_lexicon_words_merge_two_lexicons_drop_disagreements_and_held_out_words():
    """VADER alone gives VADER's words unchanged (the older variants stay reproducible); with AFINN a word is kept only
    where every lexicon that lists it agrees on its sign, and the generated test's deciding words can be left out."""
    pytest.importorskip("vaderSentiment")
    pytest.importorskip("afinn")
    from rollout_core.data import sentiment

    vader, afinn = reviews.vader_words(), reviews.afinn_words()
    assert reviews.lexicon_words(True, False) == vader
    both = reviews.lexicon_words(True, True)
    for positive in (True, False):
        assert set(both[positive]) == (set(vader[positive]) | set(afinn[positive])) - set(
            vader[not positive]) - set(afinn[not positive])
    # hand-checked entries: AFINN-165 rates "superb" +5 and "abandon" -2; VADER rates "abandon" -1.9, under its 2.0 line
    assert "superb" in both[True] and "abandon" in both[False] and "abandon" not in vader[False]
    held_out = sentiment.held_out_words()
    assert held_out & set(vader[True] + vader[False]), "the check below would prove nothing"
    kept = reviews.lexicon_words(True, True, held_out)
    assert not held_out & set(kept[True] + kept[False])
    assert set(kept[True]) == set(both[True]) - held_out
