"""Attention sinks: detection on planted sinks (hand-made attentions and a tiny BERT whose weights make a
token a sink), sink-free rollout against a naive hand loop, value-norm hooks, the summary sentence."""
from __future__ import annotations

import numpy as np
import pytest
import torch
import transformers as tf

from rollout_core.errors import InputError
from rollout_core.maths.rollout import attention_rollout
from rollout_core.maths.sinks import describe_sinks, find_sinks, sink_free_rollout
from rollout_core.models.value_norms import record_value_norms, value_projections

N = 12  # positions in the hand-made attentions: a sink can take at most N x uniform


def _planted(batch: int = 2, heads: int = 2, n: int = 12, layers: int = 3, sink: int = 2, seed: int = 0):
    """Random row-stochastic attentions where column `sink` takes ~80% of every row in layers 0 and 1."""
    g = torch.Generator().manual_seed(seed)
    a = torch.rand(layers, batch, heads, n, n, generator=g, dtype=torch.float64)
    a[:2, :, :, :, sink] = 20.0
    return a / a.sum(-1, keepdim=True)


def _naive_sink_free(attentions: np.ndarray, sinks: np.ndarray, residual: float = 1.0) -> np.ndarray:
    """Per sample, per layer: mean over heads, drop the sink columns, add residual·I, normalise rows, multiply."""
    layers, batch, heads, n, _ = attentions.shape
    out = np.zeros((batch, n, n))
    for b in range(batch):
        product = np.eye(n)
        for l in range(layers):
            fused = attentions[l, b].mean(0).copy()
            for j in range(n):
                if sinks[l, b, j]:
                    fused[:, j] = 0.0
            fused += residual * np.eye(n)
            for i in range(n):
                fused[i] /= fused[i].sum()
            product = fused @ product
        out[b] = product
    return out


def test_planted_sink_found_in_the_layers_it_is_planted():
    a = _planted()
    norms = torch.full((3, 2, N), 4.0, dtype=torch.float64)
    norms[:, :, 2] = 0.01
    report = find_sinks(a, norms)
    expected = torch.zeros(3, 2, N, dtype=torch.bool)
    expected[:2, :, 2] = True
    assert torch.equal(report.sinks, expected)
    share = a[:2, :, :, :, 2].mean(2).sum(-1) / N  # the sink's column over the whole layer, by hand
    assert torch.allclose(report.share[:2], share)
    assert torch.all(report.share[2] == 0)


def test_value_criterion_rejects_a_high_norm_token():
    norms = torch.full((3, 2, N), 4.0, dtype=torch.float64)
    norms[:, :, 2] = 9.0  # takes the attention but carries a large value: not a sink
    assert not find_sinks(_planted(), norms).sinks.any()
    assert find_sinks(_planted()).sinks[:2, :, 2].all()  # attention-only criterion


def test_exclude_and_padding():
    a = _planted()
    assert not find_sinks(a, exclude=[2]).sinks.any()
    mask = torch.ones(2, N)
    mask[1, N - 1] = 0  # padded key: never a sink, and the uniform level counts 4 real tokens
    report = find_sinks(a, attention_mask=mask)
    assert not report.sinks[:, 1, N - 1].any() and report.sinks[:2, :, 2].all()


def test_sink_free_rollout_equals_the_hand_product():
    a = _planted()
    report = find_sinks(a)
    got = sink_free_rollout(a, report)
    assert torch.allclose(got, torch.as_tensor(_naive_sink_free(a.numpy(), report.sinks.numpy())), atol=1e-12)
    assert torch.allclose(got.sum(-1), torch.ones(2, N, dtype=torch.float64))
    steps = sink_free_rollout(a, report, all_layers=True, start_layer=1)
    assert steps.shape == (2, 2, N, N)
    assert torch.allclose(steps[-1], _rollout_from_one(a, report))


def _rollout_from_one(a, report):
    return torch.as_tensor(_naive_sink_free(a[1:].numpy(), report.sinks[1:].numpy()))


def test_no_sinks_is_plain_rollout():
    a = _planted()
    none = torch.zeros(3, 2, N, dtype=torch.bool)
    assert torch.allclose(sink_free_rollout(a, none, residual_weight=0.5), attention_rollout(a, residual_weight=0.5))


def test_bad_inputs_are_clear_errors():
    a = _planted()
    with pytest.raises(InputError):
        sink_free_rollout(a, torch.zeros(2, 2, N, dtype=torch.bool))
    with pytest.raises(InputError):
        find_sinks(a, torch.ones(3, 2, N - 1))
    with pytest.raises(InputError):
        find_sinks(a, ratio=0.5)
    with pytest.raises(InputError):
        find_sinks(a, exclude=[99])


def test_describe_sinks():
    report = find_sinks(_planted())
    tokens = ["[CLS]", "a", ".", *"bcdefghij", "[SEP]"]
    sentence = describe_sinks(report, tokens)
    share = round(float(report.share[:, 0].max()) * 100)
    assert sentence.startswith("1 sink token ('.') took ") and f"{share}% of layer " in sentence
    assert describe_sinks(find_sinks(_planted(), exclude=[2]), tokens) == "No attention sinks were found."


def _sink_bert(hidden: int = 8, sink: int = 1) -> tuple[torch.nn.Module, torch.Tensor]:
    """One-layer BERT whose weights make position `sink` a sink: the query is a constant big multiple of u,
    keys are the inputs, and the value projection removes u, the sink's only direction."""
    config = tf.BertConfig(vocab_size=10, hidden_size=hidden, num_hidden_layers=1, num_attention_heads=2,
                           intermediate_size=16, attn_implementation="eager")
    model = tf.BertModel(config).eval()
    u = torch.zeros(hidden)
    u[0], u[1] = 1.0, -1.0
    u /= u.norm()
    g = torch.Generator().manual_seed(0)
    embeds = torch.randn(1, 5, hidden, generator=g)
    embeds[..., :2] = 0.0
    embeds -= embeds.mean(-1, keepdim=True) * torch.tensor([0, 0] + [1] * (hidden - 2))
    embeds[0, sink] = 3.0 * u
    with torch.no_grad():
        emb = model.embeddings
        emb.position_embeddings.weight.zero_()
        emb.token_type_embeddings.weight.zero_()
        attn = model.encoder.layer[0].attention.self
        attn.query.weight.zero_()
        attn.query.bias.copy_(20.0 * u)
        attn.key.weight.copy_(torch.eye(hidden))
        attn.key.bias.zero_()
        attn.value.weight.copy_(torch.eye(hidden) - torch.outer(u, u))
        attn.value.bias.zero_()
    return model, embeds


def test_tiny_bert_with_a_sink_is_found_through_the_hooks():
    model, embeds = _sink_bert()
    assert value_projections(model) == [model.encoder.layer[0].attention.self.value]
    with record_value_norms(model) as recorded, torch.no_grad():
        out = model(inputs_embeds=embeds, output_attentions=True)
    norms = recorded.norms
    assert norms.shape == (1, 1, 5)
    u = torch.tensor([1.0, -1] + [0] * 6) / 2**0.5
    v = model.embeddings.LayerNorm(embeds) @ (torch.eye(8) - torch.outer(u, u))
    assert torch.allclose(norms[0, 0], v.view(5, 2, 4).norm(dim=-1).mean(-1).detach(), atol=1e-5)  # recomputed by hand
    report = find_sinks(out.attentions, norms, ratio=2.5)  # 5 positions: at most 5x uniform
    # u lies in head 0's dimensions: head 0 puts everything on the sink, head 1 is uniform -> (1 + 1/5) / 2 x 5
    assert abs(float(report.received[0, 0, 1]) - 3.0) < 1e-3
    assert report.sinks[0, 0].tolist() == [False, True, False, False, False]
    with torch.no_grad():  # the hooks stay on the model (installed once) but act only inside a block
        model(inputs_embeds=embeds * 2)
    torch.testing.assert_close(recorded.norms, norms, rtol=0, atol=0)


def test_unsupported_family_gives_no_norms():
    model = tf.GPT2Model(tf.GPT2Config(n_embd=8, n_layer=1, n_head=2, vocab_size=10))
    assert value_projections(model) is None
    with record_value_norms(model) as recorded:
        model(torch.tensor([[1, 2, 3]]))
    assert recorded.norms is None
