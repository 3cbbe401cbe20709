"""ALTI rollout over the fine-tuned blocks, against explicit per-token ALTI loops and the training records."""
from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from test_contribution_methods import TEXT, _alti_layer, _bert_layers, _forward, _method_output

from rollout_core.explain import explain_text, explain_texts
from rollout_core.models import registry
from rollout_core.paths import ASSETS_DIR
from rollout_core.summary import summarize


@pytest.fixture
def tuned_from(monkeypatch):
    """`tuned_from(handle, layer)`: the registry says `handle`'s layers below `layer` were frozen."""
    def patch(handle, layer):
        entry = registry.RegistryEntry(handle.name, "bert", "text-classification", "text", "tiny", embedded=True,
                                       first_tuned_layer=layer)
        monkeypatch.setattr(registry, "lookup", lambda name: entry if name == handle.name else None)
    return patch


def test_first_tuned_layers_are_the_training_records():
    image = json.loads((ASSETS_DIR / "image-top" / "training.json").read_text())["settings"]
    text = json.loads((ASSETS_DIR / "text-sentiment" / "training.json").read_text())["settings"]
    assert registry.lookup("default-image").first_tuned_layer == 12 - image["trained_blocks"]  # DINOv2-small: 12
    assert registry.lookup("default-text").first_tuned_layer == min(text["trained_layers"])
    assert registry.lookup("dinov2-small").first_tuned_layer is None


def test_rolls_out_explicit_alti_of_the_tuned_layers_only(tiny_handle, tuned_from):
    handle = tiny_handle("bert")
    tuned_from(handle, 1)
    hidden, atts = _forward(handle.model, dict(handle.processor([TEXT], return_tensors="pt")))
    with torch.no_grad():
        top = _alti_layer(_bert_layers(handle)[1], hidden[1], atts[1])  # layer 1 alone: layer 0 is frozen
    e = explain_text(handle, TEXT, method="alti_tuned")
    assert e.settings["first_tuned_layer"] == 1
    np.testing.assert_allclose(e.scores, top[0].numpy(), atol=2e-5)
    assert e.settings["start_layer"] == 1 and len(e.layer_scores) == 1  # the slider holds the tuned layer only
    np.testing.assert_allclose(e.layer_attention[0], top.numpy(), atol=2e-5)
    assert "through 1 layer (layer 2)" in summarize(e)


def test_a_start_layer_below_the_first_tuned_one_is_raised_and_above_it_kept(tiny_handle, tuned_from):
    handle = tiny_handle("roberta")  # 3 layers: one frozen, two tuned
    tuned_from(handle, 1)
    assert explain_text(handle, TEXT, method="alti_tuned", start_layer=0).settings["start_layer"] == 1
    kept = explain_text(handle, TEXT, method="alti_tuned", start_layer=2)
    assert kept.settings["start_layer"] == 2
    np.testing.assert_allclose(kept.scores, explain_text(handle, TEXT, method="alti", start_layer=2).scores,
                               atol=1e-12)


def test_without_a_training_record_it_is_refused_and_not_offered(tiny_handle):
    """Without a record it would be plain ALTI rollout under another name: refused before any forward pass, with
    the reason and the methods that can run, and left out of what the pickers offer."""
    from rollout_core import methods
    from rollout_core.errors import InputError

    handle = tiny_handle("bert")
    with pytest.raises(InputError, match="fine-tuned blocks are recorded.*choose one of: rollout.*alti"):
        explain_text(handle, TEXT, method="alti_tuned")
    offered = [s.name for s in methods.runnable(handle)]
    assert "alti_tuned" not in offered and "alti" in offered


def test_every_block_tuned_is_refused_naming_alti_and_not_offered(tiny_handle, tuned_from):
    """First tuned layer 0 (every block trained, default-text's record) would make it ALTI rollout under another
    name: refused with `alti` named, whatever the start layer, and left out of what the pickers offer."""
    from rollout_core import methods
    from rollout_core.errors import InputError

    handle = tiny_handle("bert")
    tuned_from(handle, 0)
    for start in (0, 1):
        with pytest.raises(InputError, match=r"every block of .* was fine-tuned .*use alti; choose one of: .*alti"):
            explain_text(handle, TEXT, method="alti_tuned", start_layer=start)
    offered = [s.name for s in methods.runnable(handle)]
    assert "alti_tuned" not in offered and "alti" in offered
    tuned_from(handle, 1)  # the same model with a frozen block below: offered
    assert "alti_tuned" in [s.name for s in methods.runnable(handle)]


@pytest.mark.parametrize("name,offered", [("default-text", False), ("default-image", True)])
def test_the_default_models_records_decide_whether_it_is_offered(name, offered):
    """default-text (all six layers trained) is refused it; default-image (blocks 10-11 of 12 trained) keeps it."""
    from rollout_core import methods
    from rollout_core.errors import InputError
    from rollout_core.models.loading import load_model

    if not registry.is_available(registry.lookup(name)):
        pytest.skip(f"{name} is not built: {registry.SETUP_HINT}")
    handle = load_model(name)
    assert ("alti_tuned" in [s.name for s in methods.runnable(handle)]) is offered
    if offered:
        assert methods.check("alti_tuned", handle).name == "alti_tuned"
    else:
        with pytest.raises(InputError, match=f"every block of {name} was fine-tuned.*use alti"):
            methods.check("alti_tuned", handle)


def test_padding_is_zero_and_a_batch_equals_single_texts(tiny_handle, tuned_from):
    handle = tiny_handle("bert")
    tuned_from(handle, 1)
    texts = ["the movie was very good and fun", "bad plot"]
    inputs = dict(handle.processor(texts, return_tensors="pt", padding=True))
    short = int(inputs["attention_mask"][1].sum())
    with torch.no_grad():
        out = _method_output(handle, "alti_tuned", inputs)
    assert short < inputs["input_ids"].shape[1]
    assert (out.layer_rows[:, 1, short:] == 0).all()
    assert (out.final_matrix(inputs["attention_mask"])[1, short:] == 0).all()
    assert (out.layer_maps[:, 1, short:] == 0).all() and (out.layer_maps[:, 1, :, short:] == 0).all()
    for batched, text in zip(explain_texts(handle, texts, method="alti_tuned"), texts):
        alone = explain_text(handle, text, method="alti_tuned")
        np.testing.assert_allclose(batched.scores, alone.scores, atol=1e-5)


def test_spec():
    from rollout_core import methods

    spec = methods.get("alti_tuned")
    assert not spec.uses_head_fusion and not spec.uses_residual and spec.cumulative
    assert not spec.class_specific and not spec.can_stream
