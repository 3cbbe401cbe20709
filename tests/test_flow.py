"""Attention flow against the networkx edmonds_karp reference (the rollout paper's approach)."""
import networkx as nx
import numpy as np
import pytest
import torch

from rollout_core.errors import InputError
from rollout_core.maths.flow import attention_flow


def reference_flow(attn_sample, residual=1.0):
    """Independent reference: augment each layer in numpy, build the graph in networkx, solve per pair."""
    layers = [a.mean(axis=0) for a in attn_sample]
    n = layers[0].shape[0]
    graph = nx.DiGraph()
    for depth, fused in enumerate(layers):
        aug = fused + residual * np.eye(n)
        aug = aug / aug.sum(axis=1, keepdims=True)
        for i in range(n):
            for j in range(n):
                graph.add_edge((depth, j), (depth + 1, i), capacity=aug[i, j])
    top = len(layers)
    flow = np.array([[nx.maximum_flow_value(graph, (0, j), (top, i), flow_func=nx.algorithms.flow.edmonds_karp)
                      for j in range(n)] for i in range(n)])
    return flow / flow.sum(axis=1, keepdims=True)


def attention(layers, batch, heads, n, seed):
    g = torch.Generator().manual_seed(seed)
    return [torch.softmax(torch.randn(batch, heads, n, n, generator=g, dtype=torch.float64) * 2, -1)
            for _ in range(layers)]


@pytest.mark.parametrize("seed, layers, n", [(0, 2, 4), (1, 3, 5), (2, 4, 6)])
def test_flow_equals_networkx(seed, layers, n):
    attn = attention(layers, 2, 2, n, seed)
    ours = attention_flow(attn)
    for b in range(2):
        expected = reference_flow([a[b].numpy() for a in attn])
        assert np.abs(ours[b].numpy() - expected).max() < 1e-3


def test_padding_is_exactly_zero_and_matches_unpadded():
    attn = attention(3, 1, 2, 6, seed=3)
    for a in attn:
        a[0, :, :4, 4:] = 0
        a[0, :, :4, :4] /= a[0, :, :4, :4].sum(-1, keepdim=True)
    mask = torch.tensor([[1, 1, 1, 1, 0, 0]])
    padded = attention_flow(attn, attention_mask=mask, output_tokens=[0, 2, 5])
    alone = attention_flow([a[:, :, :4, :4] for a in attn], output_tokens=[0, 2])
    assert torch.all(padded[0, 2] == 0)  # output 5 is padding
    assert torch.all(padded[0, :, 4:] == 0)
    assert torch.allclose(padded[0, :2, :4], alone[0], atol=1e-6)
    assert torch.allclose(padded[0, :2].sum(-1), torch.ones(2, dtype=torch.float64))


def test_progress_counts_every_max_flow_problem():
    attn = attention(4, 1, 2, 8, seed=4)
    calls = []
    attention_flow(attn, output_tokens=[0, 3], progress=lambda done, total: calls.append((done, total)))
    assert calls == [(k, 16) for k in range(1, 17)]


def test_bad_output_tokens_are_refused():
    with pytest.raises(InputError, match="output_tokens"):
        attention_flow(attention(1, 1, 1, 3, 0), output_tokens=[3])


def test_padded_batch_equals_networkx_with_half_residual():
    """Peaky attention, residual 0.5, one padded sample: each sample equals the reference on its real tokens."""
    n, length = 7, 5
    attn = [torch.softmax(t * 3, -1) for t in attention(4, 2, 2, n, seed=5)]
    for a in attn:
        a[0, :, :, length:] = 0
        a[0] /= a[0].sum(-1, keepdim=True)
    mask = torch.tensor([[1] * length + [0] * (n - length), [1] * n])
    ours = attention_flow(attn, residual_weight=0.5, attention_mask=mask)
    for b, real in ((0, length), (1, n)):
        expected = reference_flow([a[b, :, :real, :real].numpy() for a in attn], residual=0.5)
        assert np.abs(ours[b, :real, :real].numpy() - expected).max() < 1e-3
    assert torch.all(ours[0, length:] == 0) and torch.all(ours[0, :, length:] == 0)


def test_layer_slicing_and_one_layer_graphs():
    attn = attention(4, 1, 2, 6, seed=6)
    assert torch.allclose(attention_flow(attn, start_layer=1, end_layer=3), attention_flow(attn[1:3]))
    # one layer: the flow from j into i is the edge itself, Ã_1[i, j], normalised per row
    one = attn[0][0].mean(0).numpy() + np.eye(6)
    expected = one / one.sum(axis=1, keepdims=True)
    assert np.abs(attention_flow(attn[:1])[0].numpy() - expected).max() < 1e-6
    with pytest.raises(InputError, match="integers"):
        attention_flow(attn, start_layer=0.5)


def reference_pooled_flow(attn_sample, weights):
    """networkx: the layered graph plus a super-sink fed by each top node with capacity weights[i]."""
    layers = [a.mean(axis=0) for a in attn_sample]
    n = layers[0].shape[0]
    graph = nx.DiGraph()
    for depth, fused in enumerate(layers):
        aug = (fused + np.eye(n)) / (fused + np.eye(n)).sum(axis=1, keepdims=True)
        for i in range(n):
            for j in range(n):
                graph.add_edge((depth, j), (depth + 1, i), capacity=aug[i, j])
    for i in range(n):
        graph.add_edge((len(layers), i), "sink", capacity=weights[i] / weights.sum())
    flow = np.array([nx.maximum_flow_value(graph, (0, j), "sink") for j in range(n)])
    return flow / flow.sum()


def test_pooled_flow_equals_networkx_super_sink_and_one_hot_equals_the_row():
    from rollout_core.maths.flow import pooled_attention_flow

    attn = attention(3, 2, 2, 5, seed=9)
    weights = torch.tensor([[0.5, 0.0, 1.0, 1.0, 0.5], [1.0, 1.0, 1.0, 1.0, 1.0]], dtype=torch.float64)
    ours = pooled_attention_flow(attn, weights)
    for b in range(2):
        expected = reference_pooled_flow([a[b].numpy() for a in attn], weights[b].numpy())
        assert np.abs(ours[b].numpy() - expected).max() < 1e-3
    one_hot = torch.zeros(2, 5, dtype=torch.float64)
    one_hot[:, 3] = 1.0
    assert torch.allclose(pooled_attention_flow(attn, one_hot), attention_flow(attn, output_tokens=[3])[:, 0],
                          atol=1e-6)
