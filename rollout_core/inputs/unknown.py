"""How much of a text the model could read: the share of its tokens that are the tokenizer's unknown token.

A WordPiece model sees an emoji-only text as a row of [UNK]s and still answers with high confidence; an
explanation's warnings say so (rollout_core.reliability.text), and `confidence_note` gives the same note for a
text that has not been explained.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from rollout_core.inputs.text import encode_text
from rollout_core.reliability.text import unknown_note


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
    return unknown_note(share.unknown, share.total, share.token, label, probability)
