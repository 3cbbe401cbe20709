"""Reliability notes for a text classifier's prediction: when its probability should not be taken at its word.

Four cases, each a short sentence for `Explanation.warnings`:
- most of the text is the tokenizer's unknown token (emoji, rare scripts): the model read almost nothing;
- the calibrated top probability is inside the model's "uncertain" band (a model folder may store the band's
  upper edge in its config as `UNCERTAIN_KEY`; default-text's is fitted on hand-written neutral statements):
  no clear sentiment, typically a neutral statement, mixed or unfamiliar wording;
- the text is longer than the longest text the model was trained on (`TRAINED_TOKENS_KEY` in the config);
- the text was cut at the model's input limit.
"""
from __future__ import annotations

from typing import Any

UNCERTAIN_KEY = "uncertain_below"
"""Config key: a calibrated top probability below this is reported as uncertain."""
TRAINED_TOKENS_KEY = "trained_max_tokens"
"""Config key: the most tokens (without special tokens) of any text the model was trained on."""
MOSTLY_UNKNOWN = 0.5
"""From this share of unknown tokens on, the prediction is flagged."""


def _config_number(config: Any, key: str) -> float | None:
    value = getattr(config, key, None)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
        return None
    return float(value)


def model_limits(config: Any) -> dict[str, float | None]:
    """The uncertain band's edge and the trained length a model config stores (None where it stores none)."""
    return {"uncertain_below": _config_number(config, UNCERTAIN_KEY),
            "trained_max_tokens": _config_number(config, TRAINED_TOKENS_KEY)}


def unknown_note(unknown: int, total: int, token: str, label: str | None, probability: float | None) -> str | None:
    """A note when most of the text's `total` tokens are the unknown `token`, naming the confidence it undercuts."""
    if total == 0 or unknown / total < MOSTLY_UNKNOWN:
        return None
    part = (f"{unknown / total:.0%} of the text's tokens ({unknown} of {total}) are unknown to the model's "
            f"vocabulary (read as {token})")
    if unknown == total:
        part = f"none of the text's {total} tokens is in the model's vocabulary (all read as {token})"
    sure = f"The model is {probability:.1%} sure of {label}, but " if label is not None and probability is not None \
        else "Note: "
    return (f"{sure}{part}: the prediction rests on almost nothing of what was written, so do not trust its "
            "confidence. Emoji and rare scripts are typical causes.")


def text_notes(words: int, unknown: int = 0, *, unknown_token: str = "[UNK]", label: str | None = None,
               probability: float | None = None, uncertain_below: float | None = None,
               trained_max_tokens: float | None = None, truncation: dict[str, int] | None = None,
               text: str | None = None) -> tuple[str, ...]:
    """The notes for one explained text of `words` tokens (special tokens not counted), `unknown` of them the
    tokenizer's `unknown_token`; `label` and `probability` its (calibrated) top prediction, if it classifies; the
    limits come from `model_limits`."""
    notes = []
    note = unknown_note(unknown, words, unknown_token, label, probability)
    if note:
        notes.append(note)
    if probability is not None and uncertain_below is not None and probability < uncertain_below:
        notes.append(f"Uncertain: {probability:.0%} is below this model's {uncertain_below:.0%} confidence line, "
                     "where it found no clear sentiment (a neutral statement, mixed or unfamiliar wording); "
                     f"read {label} as a weak lean, not a verdict.")
    if trained_max_tokens is not None and words > trained_max_tokens:
        notes.append(f"This text has {words} tokens; the model was trained on texts of at most "
                     f"{trained_max_tokens:.0f}, so its prediction on a text this long is less reliable.")
    if truncation:
        tail = f"; the explained text ends with: “…{text[-40:]}”" if text else ""
        notes.append(f"The text is longer than the model's limit: only the first {truncation['kept_chars']:,} of "
                     f"{truncation['total_chars']:,} characters ({truncation['kept_tokens']} tokens) were read and "
                     f"explained{tail}")
    return tuple(notes)
