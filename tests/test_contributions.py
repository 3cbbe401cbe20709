"""Norm-based and ALTI contributions against explicit loops, a hand case, the decomposition identity, masks."""
from __future__ import annotations

import pytest
import torch
from torch import nn

from rollout_core.errors import UnsupportedModelError
from rollout_core.maths.contributions import alti_contributions, norm_contributions, transformed_vectors
from rollout_core.models.layer_access import LayerAccess, Recorded, recording

TEXTS = ["the food was cold", "a b c d e f the waiter"]


def _record(handle, inputs):
    with torch.no_grad(), recording(handle.model) as rec:
        handle.model(**inputs, output_attentions=True)
    return rec


def _inputs(handle, texts=None):
    if handle.modality == "image":
        torch.manual_seed(1)
        size = handle.processor.size
        return {"pixel_values": torch.randn(2, 3, size["height"], size["width"])}
    return dict(handle.processor(texts or TEXTS, return_tensors="pt", padding=True))


@pytest.mark.parametrize("kind", ["bert", "distilbert", "vit", "dinov2"])
def test_norms_equal_explicit_loop(tiny_handle, kind):
    handle = tiny_handle(kind)
    inputs = _inputs(handle, ["the food was cold"])
    rec = _record(handle, inputs)
    got = norm_contributions(rec)
    for layer, (acc, x, probs) in enumerate(zip(rec.layers, rec.attn_input, rec.probs)):
        heads, dh = acc.num_heads, acc.value.weight.shape[0] // acc.num_heads
        b, n = 0, x.shape[1]
        for i in range(n):
            for j in range(n):
                total = torch.zeros(acc.output.weight.shape[0])
                for h in range(heads):
                    rows = slice(h * dh, (h + 1) * dh)
                    v = acc.value.weight[rows] @ x[b, j] + acc.value.bias[rows]
                    total += probs[b, h, i, j] * (acc.output.weight[:, rows] @ v)
                assert got[layer, b, i, j].item() == pytest.approx(total.norm().item(), rel=1e-4, abs=1e-6)


@pytest.mark.parametrize("kind", ["bert", "distilbert", "roberta", "vit", "deit", "dinov2"])
def test_decomposition_sums_to_the_real_block_output(tiny_handle, kind):
    handle = tiny_handle(kind)
    rec = _record(handle, _inputs(handle))
    assert len(rec.probs) == len(rec.layers) == len(rec.block_out)
    for acc, x, a_in, probs, real in zip(rec.layers, rec.residual, rec.attn_input, rec.probs, rec.block_out):
        t, bias = transformed_vectors(acc, x, a_in, probs)
        torch.testing.assert_close(t.sum(dim=2) + bias, real, atol=1e-5, rtol=1e-5)


def test_alti_hand_case_one_layer():
    """Pre-LN layer, one head, identity V and O, no biases: T_i(x_j) = a_ij x_j + [i = j] x_j."""
    lin = []
    for _ in range(4):
        m = nn.Linear(2, 2)
        with torch.no_grad():
            m.weight.copy_(torch.eye(2))
            m.bias.zero_()
        lin.append(m)
    acc = LayerAccess(*lin, num_heads=1, norm=nn.LayerNorm(2), post_ln=False, layer=nn.Identity(),
                      attention=nn.Identity(), block_output=nn.Identity())
    x = torch.tensor([[[1.0, 0.0], [0.0, 2.0]]])
    a = torch.tensor([[[[0.25, 0.75], [0.5, 0.5]]]])
    rec = Recorded([acc], residual=[x], attn_input=[x], probs=[a])
    got = alti_contributions(rec)[0, 0]
    # token 0: T_0(x_0) = 1.25 * (1, 0) = (1.25, 0); T_0(x_1) = 0.75 * (0, 2) = (0, 1.5); y_0 = (1.25, 1.5)
    # ||y_0||_1 = 2.75; c_00 = 2.75 - ||(0, 1.5)||_1 = 1.25; c_01 = 2.75 - 1.25 = 1.5
    # token 1: T_1(x_0) = (0.5, 0); T_1(x_1) = 1.5 * (0, 2) = (0, 3); y_1 = (0.5, 3): c_10 = 0.5, c_11 = 3
    expected = torch.tensor([[1.25 / 2.75, 1.5 / 2.75], [0.5 / 3.5, 3.0 / 3.5]], dtype=torch.float64)
    torch.testing.assert_close(got, expected)  # float64 from a float32 recording: the L1 differences cancel
    norms = norm_contributions(rec)[0, 0]  # ||a_ij x_j||
    torch.testing.assert_close(norms, torch.tensor([[0.25, 1.5], [0.5, 1.0]]))


@pytest.mark.parametrize("measure", [norm_contributions, alti_contributions])
def test_padded_batch_equals_one_by_one(tiny_handle, measure):
    handle = tiny_handle("bert")
    inputs = _inputs(handle)
    mask = inputs["attention_mask"]
    batch = measure(_record(handle, inputs), mask)
    for b, text in enumerate(TEXTS):
        alone = measure(_record(handle, _inputs(handle, [text])))
        n = int(mask[b].sum())
        torch.testing.assert_close(batch[:, b, :n, :n], alone[:, 0], atol=1e-5, rtol=1e-5)
        assert (batch[:, b, n:, :] == 0).all() and (batch[:, b, :, n:] == 0).all()
    if measure is alti_contributions:
        sums = batch.sum(-1)
        torch.testing.assert_close(sums, mask[None].expand_as(sums).double())


def test_unsupported_family_is_named(tiny_handle):
    with pytest.raises(UnsupportedModelError, match="bert, roberta.*dinov2.*this model is 'gpt2'"):
        with recording(tiny_handle("gpt2").model):
            pass
