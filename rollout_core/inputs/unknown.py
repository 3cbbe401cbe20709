"""How much of a text the model could read: the share of its tokens that are the tokenizer's unknown token.

A WordPiece model sees an emoji-only text as a row of [UNK]s and still answers with high confidence; the
pages put `confidence_note` above the prediction so a user does not take that confidence at its word.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from rollout_core.inputs.text import encode_text

MOSTLY_UNKNOWN = 0.5
"""From this share of unknown tokens on, the prediction is flagged."""


@dataclass(frozen=True)
class UnknownShare:
    """Unknown tokens among the text's (non-special) tokens, with their text spans."""

    unknown: int
    total: int
    token: str  # the tokenizer's unknown token, e.g. "[UNK]"
    spans: tuple[str, ...] = ()

    @property
    def share(self) -> float:
        return self.unknown / self.total if self.total else 0.0


def unknown_share(tokenizer: Any, text: str, max_length: int) -> UnknownShare:
    """Count the tokens of `text` (cut at `max_length` as the model's input is) that are the unknown token.
    Tokenizers without one (byte-level BPE reads every character) give 0 unknown."""
    encoded = encode_text(tokenizer, text, max_length)
    unk = getattr(tokenizer, "unk_token_id", None)
    words = [(i, t) for i, t, s in zip(encoded.input_ids, encoded.tokens, encoded.special) if not s]
    spans = tuple(t for i, t in words if unk is not None and i == unk)
    return UnknownShare(len(spans), len(words), str(getattr(tokenizer, "unk_token", None) or "unknown"), spans)


def confidence_note(share: UnknownShare, label: str | None, probability: float | None) -> str | None:
    """A warning when most of the text is unknown tokens, naming the confidence it undercuts; else None."""
    if share.total == 0 or share.share < MOSTLY_UNKNOWN:
        return None
    part = (f"{share.share:.0%} of the text's tokens ({share.unknown} of {share.total}) are unknown to the model's "
            f"vocabulary (read as {share.token})")
    if share.unknown == share.total:
        part = f"none of the text's {share.total} tokens is in the model's vocabulary (all read as {share.token})"
    sure = f"The model is {probability:.1%} sure of {label}, but " if label is not None and probability is not None \
        else "Note: "
    return (f"{sure}{part}: the prediction rests on almost nothing of what was written, so do not trust its "
            "confidence. Emoji and rare scripts are typical causes.")
