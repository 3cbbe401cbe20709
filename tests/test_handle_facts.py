"""pipeline.facts: what an explanation reads of a handle's config and processor is read once per handle object, is
what the direct reads give, and never outlives the handle or leaks into another handle of the same model."""
from __future__ import annotations

import copy
import dataclasses
import gc
from typing import Any, Callable

from rollout_core.calibration import config_temperature
from rollout_core.explain import explain_text
from rollout_core.inputs.text import model_max_length, pad_token_id
from rollout_core.models import families
from rollout_core.pipeline import facts as facts_module
from rollout_core.pipeline.facts import handle_facts


def test_the_facts_are_the_direct_reads_once_per_handle(tiny_handle: Callable[[str], Any]) -> None:
    bert = tiny_handle("bert")
    facts = handle_facts(bert)
    assert handle_facts(bert) is facts
    spec = families.spec_for(bert.config)
    assert (facts.spec, facts.pooling) == (spec, families.head_pooling(spec, bert.config, bert.model, bert.task))
    assert facts.max_length == model_max_length(bert.processor, bert.config, spec.position_offset)
    assert facts.pad_id == pad_token_id(bert.processor) and facts.unk_id == bert.processor.unk_token_id
    assert facts.unk_token == bert.processor.unk_token and facts.temperature == config_temperature(bert.config)
    vit = handle_facts(tiny_handle("vit"))
    assert vit.max_length is None and vit.pad_id is None and vit.pooling == "first"


def test_another_handle_of_the_same_model_reads_its_own_and_the_entry_goes_with_it(
        tiny_handle: Callable[[str], Any]) -> None:
    bert = tiny_handle("bert")
    text = "the film was good but the plot was slow and the music was fun"
    assert explain_text(bert, text).truncation is None
    tokenizer = copy.deepcopy(bert.processor)
    tokenizer.model_max_length = 6
    short = dataclasses.replace(bert, processor=tokenizer)
    cut = explain_text(short, text)
    assert len(cut.tokens) == 6 and cut.truncation is not None  # not the first handle's limit
    assert explain_text(bert, text).truncation is None  # nor the other way round
    key = id(short)
    assert key in facts_module._FACTS
    del short, cut
    gc.collect()
    assert key not in facts_module._FACTS
