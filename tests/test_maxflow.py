"""The compiled Dinic of maths.maxflow against networkx and scipy: values, minimum cuts, and flow rows to 1e-6."""
import networkx as nx
import numpy as np
import pytest
import torch
from scipy.sparse import csr_matrix
from scipy.sparse.csgraph import maximum_flow

from rollout_core.maths.flow import _prepare, attention_flow, pooled_attention_flow
from rollout_core.maths.maxflow import network


def cut_capacity(tails, heads, capacity, source_side):
    """Capacity of the edges from the source side to the rest."""
    return int(sum(c for t, h, c in zip(tails, heads, capacity) if source_side[t] and not source_side[h]))


def test_hand_case_needs_a_reverse_edge_and_leaves_its_min_cut():
    """s->a->c->t is found first; the second unit must undo a->c: s->b->c<-a->d->t. Max flow 2, the sink's whole
    in-capacity: that trivial cut is minimum, so the solver stops there and leaves all but t on the source side."""
    s, a, b, c, d, t = range(6)
    tails, heads = np.array([s, s, a, a, b, c, d]), np.array([a, b, c, d, c, t, t])
    capacity = np.array([1, 1, 1, 1, 1, 1, 1])
    net = network(tails, heads, capacity, 6, 2, s, t)
    assert net.solve(np.array([1, 2], np.int64)) == 2
    assert (net.level >= 0).tolist() == [True, True, True, True, True, False]
    assert net.solve(np.array([1, 0], np.int64)) == 1  # the slot (the source's two edges) rewritten: b is cut off
    assert (net.level >= 0).tolist() == [True, False, False, False, False, False]  # the source's out-capacity
    assert net.solve(np.array([0, 0], np.int64)) == 0


def test_a_cut_no_trivial_one_equals_is_left_by_the_last_search():
    """The same graph with 2 into t on each edge: max flow 2 < 3 out of s and 4 into t. The last BFS marks the
    nodes reachable from s, {s, b} (s->b has 1 spare): the cut of s->a and b->c."""
    s, a, b, c, d, t = range(6)
    tails, heads = np.array([s, s, a, a, b, c, d]), np.array([a, b, c, d, c, t, t])
    net = network(tails, heads, np.array([1, 1, 1, 1, 1, 2, 2]), 6, 2, s, t)
    assert net.solve(np.array([1, 2], np.int64)) == 2
    assert (net.level >= 0).tolist() == [True, False, True, False, False, False]


@pytest.mark.parametrize("seed", range(6))
def test_random_graphs_equal_networkx_for_every_slot_setting(seed):
    """Random directed graphs (not layered: the first phase's precomputed levels are not BFS distances there),
    integer capacities, the source's out-edges rewritten per problem; values equal networkx's exactly and the
    marked side is a cut of that capacity."""
    rng = np.random.default_rng(seed)
    size = 14
    pairs = {(int(u), int(v)) for u, v in rng.integers(0, size, (60, 2)) if u != v and v != 0}
    pairs = sorted({(u, v) for u, v in pairs if (v, u) not in pairs or u < v})
    slot = [p for p in pairs if p[0] == 0]
    rest = [p for p in pairs if p[0] != 0]
    tails = np.array([u for u, _ in slot + rest])
    heads = np.array([v for _, v in slot + rest])
    capacity = np.concatenate([np.ones(len(slot), int), rng.integers(1, 50, len(rest))])
    sink = size - 1
    net = network(tails, heads, capacity, size, len(slot), 0, sink)
    for _ in range(5):
        capacity[: len(slot)] = rng.integers(0, 60, len(slot))
        graph = nx.DiGraph()
        graph.add_nodes_from(range(size))
        graph.add_weighted_edges_from(zip(tails.tolist(), heads.tolist(), capacity.tolist()), weight="capacity")
        expected = nx.maximum_flow_value(graph, 0, sink)
        assert net.solve(capacity[: len(slot)].astype(np.int64)) == expected
        assert cut_capacity(tails, heads, capacity, net.level >= 0) == expected
        assert net.level[0] >= 0 and net.level[sink] < 0


def scipy_row(layers, output):
    """The scipy path main used before: a CSR graph with int32 capacities at 2^30, Dinic per input token."""
    n, depth, scale = layers[0].shape[0], len(layers), 2.0**30
    size = 1 + depth * n
    rows, cols, data = [], [], []
    for d in range(1, depth):
        targets = np.arange(n) if d < depth - 1 else np.array([output])
        to, src = np.nonzero(layers[d][targets] > 0)
        rows.append(1 + (d - 1) * n + src)
        cols.append(1 + d * n + targets[to])
        data.append(np.rint(layers[d][targets][to, src] * scale))
    values = []
    for j in range(n):
        graph = csr_matrix((np.concatenate([np.rint(layers[0][:, j] * scale)] + data).astype(np.int32),
                            (np.concatenate([np.zeros(n, int)] + rows), np.concatenate([1 + np.arange(n)] + cols))),
                           shape=(size, size))
        values.append(maximum_flow(graph, 0, 1 + (depth - 1) * n + output).flow_value)
    values = np.array(values, dtype=float)
    return values / values.sum()


@pytest.mark.parametrize("temperature, residual", [(3.0, 1.0), (5.0, 0.3), (0.2, 1.0)])
def test_rows_equal_the_previous_scipy_path_to_1e_6(temperature, residual):
    """Peaky (many non-trivial min cuts) and diffuse attention, 5 layers of 24 tokens, three output rows."""
    g = torch.Generator().manual_seed(7)
    attn = list(torch.softmax(torch.randn(5, 1, 2, 24, 24, generator=g, dtype=torch.float64) * temperature, -1))
    layers = [a[0] for a in _prepare(attn, "mean", residual, None, 0, None).augmented]
    ours = attention_flow(attn, residual_weight=residual, output_tokens=[0, 7, 23])[0].numpy()
    for row, output in enumerate((0, 7, 23)):
        assert np.abs(ours[row] - scipy_row(layers, output)).max() < 1e-6


def test_rows_equal_networkx_float_flow_to_1e_6():
    """networkx's preflow-push on the unscaled float capacities: rows of a peaky 4-layer, 7-token graph and a
    pooled row agree to 1e-6 (the 2^-40 rounding is far below)."""
    g = torch.Generator().manual_seed(8)
    attn = list(torch.softmax(torch.randn(4, 1, 2, 7, 7, generator=g, dtype=torch.float64) * 4, -1))
    layers = [a[0] for a in _prepare(attn, "mean", 1.0, None, 0, None).augmented]
    weights = torch.tensor([[0.2, 0.0, 0.3, 0.0, 0.0, 0.1, 0.4]], dtype=torch.float64)
    graph = nx.DiGraph()
    for depth, aug in enumerate(layers):
        for i in range(7):
            for j in range(7):
                graph.add_edge((depth, j), (depth + 1, i), capacity=aug[i, j])
    for i in range(7):
        graph.add_edge((4, i), "pool", capacity=float(weights[0, i]))
    for output in range(7):
        row = np.array([nx.maximum_flow_value(graph, (0, j), (4, output)) for j in range(7)])
        assert np.abs(attention_flow(attn, output_tokens=[output])[0, 0].numpy() - row / row.sum()).max() < 1e-6
    pooled = np.array([nx.maximum_flow_value(graph, (0, j), "pool") for j in range(7)])
    assert np.abs(pooled_attention_flow(attn, weights)[0].numpy() - pooled / pooled.sum()).max() < 1e-6
