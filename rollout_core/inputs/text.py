"""Text input: validation, normalisation, tokenisation with a truncation record, and batching.

- Empty or whitespace-only text is refused (`InputError`); anything else is fine, including emoji, mixed
  scripts, text made only of punctuation, and markup (markup is just text: special-token strings typed by
  the user, such as "[SEP]" or "</s>", are split like ordinary characters, never read as special tokens).
- The text is normalised to Unicode NFC with "\\r\\n" -> "\\n"; offsets refer to that text.
- Text longer than the model's limit is cut at the limit; `truncation` records what was kept so pages and
  the CLI can show a note: {"kept_chars", "total_chars", "kept_tokens"}.
"""
from __future__ import annotations

import threading
import unicodedata
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from rollout_core.errors import InputError

DEFAULT_MAX_LENGTH = 512
"""Limit for models without absolute positions (T5) whose tokenizer states none."""

_TOKENIZER_LOCK = threading.Lock()
"""Fast tokenizers keep truncation settings as state inside the Rust object; calls from two threads with
different limits would race ("Already borrowed"). Tokenising is quick, so one lock serialises it."""


@dataclass
class EncodedText:
    """One tokenised text, every position kept (special tokens included)."""

    text: str  # the normalised text, cut where the kept tokens end when truncated
    input_ids: list[int]
    token_type_ids: list[int] | None
    tokens: list[str]  # the text span of each token (the token string for special tokens and empty spans)
    special: list[bool]
    offsets: list[tuple[int, int]]  # (0, 0) for special tokens
    truncation: dict[str, int] | None


def normalise_text(text: Any) -> str:
    """NFC-normalised text with Windows line ends unified; InputError when there is nothing to explain."""
    if not isinstance(text, str):
        raise InputError(f"the text must be a string, not {type(text).__name__}")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as err:  # lone surrogates, e.g. undecodable bytes in a command-line argument
        raise InputError(f"the text is not valid Unicode (character {err.start} is a lone surrogate); "
                         "save or pass it as UTF-8") from None
    text = unicodedata.normalize("NFC", text.replace("\r\n", "\n"))
    if not text.strip():
        raise InputError("the text is empty: type or paste some text to explain")
    return text


def model_max_length(tokenizer: Any, config: Any, position_offset: int = 0, requested: int | None = None) -> int:
    """Most tokens (special ones included) the model accepts, optionally lowered to `requested`."""
    limits = []
    tok_limit = getattr(tokenizer, "model_max_length", None)
    if isinstance(tok_limit, int) and 0 < tok_limit < 1_000_000:
        limits.append(tok_limit)
    for name in ("max_position_embeddings", "n_positions"):
        value = getattr(config, name, None)
        if isinstance(value, int) and value > 0:
            limits.append(value - position_offset)
            break
    return lowered(min(limits) if limits else DEFAULT_MAX_LENGTH, requested)


def lowered(limit: int, requested: int | None) -> int:
    """A model's token `limit` lowered to `requested` (None: not lowered), which must be an integer of at least 2."""
    if requested is None:
        return limit
    if not isinstance(requested, int) or isinstance(requested, bool) or requested < 2:
        raise InputError(f"max_length must be an integer of at least 2, not {requested!r}")
    return min(limit, requested)


def encode_text(tokenizer: Any, text: str, max_length: int) -> EncodedText:
    """Tokenise normalised `text`, cutting it at `max_length` tokens with a truncation record."""
    return encode_texts(tokenizer, [text], max_length)[0]


def encode_texts(tokenizer: Any, texts: list[str], max_length: int) -> list[EncodedText]:
    """`encode_text` of each normalised text, in one tokenizer call (a fast tokenizer's per-call cost is paid
    once: a third of the tokenising time of a batch of 64 short sentences)."""
    with _TOKENIZER_LOCK:
        enc = tokenizer(
            texts, truncation=True, max_length=max_length, return_offsets_mapping=True,
            return_special_tokens_mask=True, split_special_tokens=True,
        )
        raw = [_token_strings(tokenizer, ids, enc["special_tokens_mask"][i], enc["offset_mapping"][i])
               for i, ids in enumerate(enc["input_ids"])]
    types = enc.get("token_type_ids")
    return [_encoded(text, list(enc["input_ids"][i]), None if types is None else list(types[i]), raw[i],
                     enc["special_tokens_mask"][i], enc["offset_mapping"][i], max_length)
            for i, text in enumerate(texts)]


def _token_strings(tokenizer: Any, ids: list[int], special_mask: list[int],
                   offset_mapping: list[tuple[int, int]]) -> dict[int, str]:
    """The token string of each position whose token shows no text of its own (special, or an empty span), by
    position: the only ones `_encoded` reads (converting every id showed in a short text's time)."""
    positions = [p for p, (s, (a, b)) in enumerate(zip(special_mask, offset_mapping)) if s or b <= a]
    return dict(zip(positions, tokenizer.convert_ids_to_tokens([ids[p] for p in positions])))


def _encoded(text: str, ids: list[int], types: list[int] | None, raw: dict[int, str], special_mask: list[int],
             offset_mapping: list[tuple[int, int]], max_length: int) -> EncodedText:
    """One text's tokenizer output -> EncodedText (token spans, truncation record)."""
    special = [bool(s) for s in special_mask]
    offsets = [(0, 0) if s else (int(a), int(b)) for s, (a, b) in zip(special, offset_mapping)]
    if all(special):
        raise InputError("the text has no characters this model's tokenizer can read")
    kept_chars = max(b for _, b in offsets)
    truncation = None
    if len(ids) >= max_length and text[kept_chars:].strip():
        truncation = {"kept_chars": kept_chars, "total_chars": len(text), "kept_tokens": len(ids)}
        text = text[:kept_chars]
    tokens = [text[a:b] if b > a else str(raw[p]) for p, (a, b) in enumerate(offsets)]
    return EncodedText(text, ids, types, tokens, special, offsets, truncation)


def token_counts(tokenizer: Any, texts: list[str], max_length: int) -> list[int]:
    """The token count `encode_text` gives each text, without offsets or tokens: cheap, for sorting batches."""
    with _TOKENIZER_LOCK:
        enc = tokenizer([normalise_text(t) for t in texts], truncation=True, max_length=max_length,
                        split_special_tokens=True)
    return [len(ids) for ids in enc["input_ids"]]


def pad_batch(encoded: list[EncodedText], pad_id: int) -> dict[str, torch.Tensor]:
    """Right-padded model inputs for a batch: input_ids, attention_mask (1 = real), token_type_ids. Each one
    tensor built from padded lists (a few tensor calls per batch, not per row: they showed in a short text's time)."""
    n = max(len(e.input_ids) for e in encoded)

    def padded(rows: list[list[int]], fill: int) -> torch.Tensor:
        return torch.from_numpy(np.array([list(r) + [fill] * (n - len(r)) for r in rows], dtype=np.int64))

    out = {"input_ids": padded([e.input_ids for e in encoded], int(pad_id)),
           "attention_mask": padded([[1] * len(e.input_ids) for e in encoded], 0)}
    if all(e.token_type_ids is not None for e in encoded):
        out["token_type_ids"] = padded([e.token_type_ids for e in encoded], 0)
    return out


def pad_token_id(tokenizer: Any) -> int:
    """The id used for padding: the pad token, else end-of-sequence (GPT-2), else 0 (masked out anyway)."""
    for value in (tokenizer.pad_token_id, tokenizer.eos_token_id):
        if value is not None:
            return int(value)
    return 0
