"""Reliability notes for text predictions (rollout_core.reliability.text) and `Explanation.warnings`."""
from __future__ import annotations

from types import SimpleNamespace

import pytest

from rollout_core.explain import explain_text
from rollout_core.reliability.text import TRAINED_TOKENS_KEY, UNCERTAIN_KEY, model_limits, text_notes



def test_a_readable_confident_short_text_gets_no_note():
    assert text_notes(4, 0, label="POSITIVE", probability=0.95, uncertain_below=0.7, trained_max_tokens=40) == ()
    assert text_notes(4, 1, label="POSITIVE", probability=0.95) == ()  # one unknown token of four: readable


def test_each_case_gives_its_own_note():
    (uncertain,) = text_notes(4, label="POSITIVE", probability=0.62, uncertain_below=0.7)
    assert uncertain.startswith("Uncertain: 62% is below this model's 70% confidence line") and "POSITIVE" in uncertain
    (long,) = text_notes(4, trained_max_tokens=3)
    assert "has 4 tokens; the model was trained on texts of at most 3" in long
    (unknown,) = text_notes(3, 2, unknown_token="[UNK]", label="NEGATIVE", probability=0.97)
    assert unknown.startswith("The model is 97.0% sure of NEGATIVE, but 67% of the text's tokens (2 of 3)")
    (cut,) = text_notes(4, truncation={"kept_chars": 1200, "total_chars": 5000, "kept_tokens": 64},
                        text="x" * 1200)
    assert "longer than the model's limit: only the first 1,200 of 5,000 characters (64 tokens)" in cut
    assert cut.endswith("ends with: “…" + "x" * 40 + "”")
    # the band's edge is exclusive, and a model without limits in its config gets no band and no length note
    assert text_notes(4, label="POSITIVE", probability=0.7, uncertain_below=0.7) == ()
    assert text_notes(400, label="POSITIVE", probability=0.51) == ()


def test_limits_are_read_from_the_config_only_when_they_are_positive_numbers():
    config = SimpleNamespace(**{UNCERTAIN_KEY: 0.7, TRAINED_TOKENS_KEY: 48})
    assert model_limits(config) == {"uncertain_below": 0.7, "trained_max_tokens": 48.0}
    for bad in (None, True, "0.7", -1, 0):
        assert model_limits(SimpleNamespace(**{UNCERTAIN_KEY: bad}))["uncertain_below"] is None
    assert model_limits(SimpleNamespace()) == {"uncertain_below": None, "trained_max_tokens": None}


@pytest.fixture
def limited(tiny_handle):
    """The tiny classifier with an uncertain band above every probability and a 2-token trained length."""
    handle = tiny_handle("bert")
    config = handle.model.config
    setattr(config, UNCERTAIN_KEY, 1.01)
    setattr(config, TRAINED_TOKENS_KEY, 2)
    yield handle
    delattr(config, UNCERTAIN_KEY)
    delattr(config, TRAINED_TOKENS_KEY)


def test_explanations_carry_the_notes_of_their_model_and_text(limited):
    e = explain_text(limited, "the film was good")
    assert len(e.warnings) == 2
    assert e.warnings[0].startswith(f"Uncertain: {e.prediction[0].probability:.0%} is below")
    assert "trained on texts of at most 2" in e.warnings[1]
    assert e.to_dict()["warnings"] == list(e.warnings)


def test_without_limits_only_what_the_text_itself_shows(tiny_handle):
    handle = tiny_handle("bert")
    assert explain_text(handle, "the film was good").warnings == ()
    assert "warnings" not in explain_text(handle, "the film was good").to_dict()
    (note,) = explain_text(handle, "😍😍 🔥 👍 🎉").warnings
    assert "none of the text's 4 tokens is in the model's vocabulary" in note
