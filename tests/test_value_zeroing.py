"""Value zeroing against an independent re-run: the whole model run with a hook zeroing v_j in layer l."""
from __future__ import annotations

import copy

import pytest
import torch

from rollout_core.errors import UnsupportedModelError
from rollout_core.maths.value_zeroing import value_zeroing_contributions


def _sharpened(model):
    """Float64 copy with larger value weights: random tiny models barely react to a zeroed value (~1e-6)."""
    model = copy.deepcopy(model).double()
    for name, m in model.named_modules():
        if name.endswith(("value", "v_lin", "v_proj")):
            m.weight.data *= 30
    return model


def _forward(model, inputs):
    with torch.no_grad():
        return model(**inputs, output_hidden_states=True).hidden_states


def _reference(model, inputs, layer: int, j: int) -> torch.Tensor:
    """Column j of layer `layer`, by zeroing v_j in a full forward and reading that layer's output."""
    value = [m for n, m in model.named_modules() if n.endswith(("value", "v_lin", "v_proj"))][layer]

    def hook(_m, _a, out):
        out = out.clone()
        out[:, j, :] = 0.0
        return out
    handle = value.register_forward_hook(hook)
    try:
        zeroed = _forward(model, inputs)[layer + 1]
    finally:
        handle.remove()
    original = _forward(model, inputs)[layer + 1]
    return 1 - (zeroed * original).sum(-1) / (zeroed.norm(dim=-1) * original.norm(dim=-1))


def _check(model, inputs):
    model = _sharpened(model)
    inputs = {k: v.double() if v.is_floating_point() else v for k, v in inputs.items()}
    hs = _forward(model, inputs)
    c = value_zeroing_contributions(model, hs, inputs.get("attention_mask"), chunk=3)
    layers, n = len(hs) - 1, hs[0].shape[1]
    assert c.shape == (layers, 1, n, n)
    for l, j in [(0, n - 1), (0, n // 2), (layers - 1, 0), (layers - 1, n // 3)]:
        raw = torch.stack([_reference(model, inputs, l, k)[0] for k in range(n)], dim=-1)  # (n_out, n_in)
        torch.testing.assert_close(c[l, 0, :, j], (raw / raw.sum(-1, keepdim=True))[:, j], atol=1e-9, rtol=1e-7)
        assert raw[:, j].min() > 1e-6  # zeroing v_j has a visible effect on every output
    torch.testing.assert_close(c.sum(-1), torch.ones(c.shape[:-1], dtype=c.dtype), atol=1e-6, rtol=0)


@pytest.mark.parametrize("kind", ["bert", "distilbert", "roberta"])
def test_text_families_match_hooked_rerun(tiny_handle, kind):
    """BERT's attention module returns the heads' contexts, DistilBERT's ends with its output projection."""
    h = tiny_handle(kind)
    _check(h.model, dict(h.processor(["the movie was very good"], return_tensors="pt")))


@pytest.mark.parametrize("kind", ["vit", "deit", "dinov2", "dinov2-registers"])
def test_image_families_match_hooked_rerun(tiny_handle, kind):
    """Pre-LN blocks (DINOv2's with layerscale): the input norm runs once for all the zeroed copies."""
    h = tiny_handle(kind)
    torch.manual_seed(0)
    size = h.model.config.image_size
    _check(h.model, {"pixel_values": torch.randn(1, 3, size, size)})


def test_shared_model_hooks_neither_run_nor_copied(tiny_handle):
    """Each layer is re-run as a private copy: a hook on the shared model (another session's recording, say)
    is not called by the re-runs and is still in place after them."""
    h = tiny_handle("bert")
    inputs = dict(h.processor(["the movie was very good"], return_tensors="pt"))
    hs = _forward(h.model, inputs)
    calls = []
    block = h.model.bert.encoder.layer[0]
    handles = [block.register_forward_hook(lambda *a: calls.append(1)),
               block.attention.self.value.register_forward_hook(lambda *a: calls.append(1))]
    try:
        value_zeroing_contributions(h.model, hs, inputs["attention_mask"])
        assert calls == []
        _forward(h.model, inputs)
        assert len(calls) == 2
    finally:
        for handle in handles:
            handle.remove()


def test_padded_batch_equals_one_by_one(tiny_handle):
    h = tiny_handle("bert")
    texts = ["the movie was very good and fun", "bad plot"]
    batch = dict(h.processor(texts, return_tensors="pt", padding=True))
    c = value_zeroing_contributions(h.model, _forward(h.model, batch), batch["attention_mask"], chunk=4)
    for b, text in enumerate(texts):
        one = dict(h.processor([text], return_tensors="pt"))
        k = one["input_ids"].shape[1]
        c1 = value_zeroing_contributions(h.model, _forward(h.model, one), None)
        torch.testing.assert_close(c[:, b, :k, :k], c1[:, 0], atol=1e-5, rtol=1e-4)
        assert (c[:, b, k:, :] == 0).all() and (c[:, b, :, k:] == 0).all()


def test_unsupported_family_named(tiny_handle):
    h = tiny_handle("gpt2")
    with pytest.raises(UnsupportedModelError, match="gpt2"):
        value_zeroing_contributions(h.model, [torch.zeros(1, 2, 32)] * 3)
