"""What the pipeline reads of a loaded model's config and processor on every explanation, read once per handle.

A handle's model, config and processor do not change after loading (`ModelHandle`), and these reads (transformers'
config and tokenizer attributes answer through slow `__getattr__`s and properties) showed in a short text's
explanation time. The facts are kept per handle object while it lives: a reloaded model is a new handle, and so is a
handle with another model or name (`dataclasses.replace`). What a test or a caller may change on a shared config
(the reliability limits) is read on every explanation, as before.
"""
from __future__ import annotations

import weakref
from dataclasses import dataclass

from rollout_core.calibration import config_temperature
from rollout_core.inputs.text import model_max_length, pad_token_id
from rollout_core.models import families
from rollout_core.models.handle import ModelHandle


@dataclass(frozen=True)
class HandleFacts:
    """One handle's facts; the text ones are None for an image model."""

    spec: families.FamilySpec
    pooling: str  # `families.head_pooling`: the rows the prediction reads
    temperature: float | None  # `calibration.config_temperature`
    max_length: int | None = None  # `inputs.text.model_max_length` with no limit asked for
    pad_id: int | None = None  # `inputs.text.pad_token_id`
    unk_id: int | None = None  # the tokenizer's unknown token id (None: it has none)
    unk_token: str = "unknown"  # the unknown token as the notes name it


_FACTS: dict[int, tuple["weakref.ref[ModelHandle]", HandleFacts]] = {}


def handle_facts(handle: ModelHandle) -> HandleFacts:
    """`handle`'s facts, read on its first explanation (the entry goes with the handle)."""
    key = id(handle)
    entry = _FACTS.get(key)
    if entry is not None and entry[0]() is handle:
        return entry[1]
    facts = _read(handle)
    _FACTS[key] = (weakref.ref(handle, lambda _: _FACTS.pop(key, None)), facts)
    return facts


def _read(handle: ModelHandle) -> HandleFacts:
    config = handle.config
    spec = families.spec_for(config)
    facts = HandleFacts(spec, families.head_pooling(spec, config, handle.model, handle.task),
                        config_temperature(config))
    if handle.modality != "text":
        return facts
    tokenizer = handle.processor
    return HandleFacts(facts.spec, facts.pooling, facts.temperature,
                       max_length=model_max_length(tokenizer, config, spec.position_offset),
                       pad_id=pad_token_id(tokenizer), unk_id=getattr(tokenizer, "unk_token_id", None),
                       unk_token=str(getattr(tokenizer, "unk_token", None) or "unknown"))
