"""Mass-pruned attention flow: its reported bound holds against exact flow; pruning keeps the stated mass."""
import numpy as np
import pytest
import torch

from rollout_core.errors import InputError
from rollout_core.maths.flow import attention_flow
from rollout_core.maths.flow_bounded import bounded_attention_flow, flow_cost_estimate, prune_by_mass


def attention(layers, n, temperature, seed):
    g = torch.Generator().manual_seed(seed)
    return torch.softmax(torch.randn(layers, 1, 2, n, n, generator=g, dtype=torch.float64) * temperature, -1)


def naive_keep_count(row, eps):
    """Smallest k such that the k largest entries hold at least (1 - eps) of the row."""
    ordered = sorted(row, reverse=True)
    for k in range(1, len(row) + 1):
        if sum(ordered[:k]) >= (1 - eps) * sum(row) - 1e-12:
            return k
    return len(row)


@pytest.mark.parametrize("eps", [0.0, 0.1, 0.3, 0.7])
def test_prune_by_mass_keeps_the_smallest_heavy_set(eps):
    rows = np.random.default_rng(0).dirichlet(np.ones(12), size=20)
    pruned = prune_by_mass(rows, eps)
    for row, kept in zip(rows, pruned):
        assert kept.sum() >= (1 - eps) * row.sum() - 1e-12
        assert (kept > 0).sum() == naive_keep_count(list(row), eps)  # distinct values: no ties


@pytest.mark.parametrize("seed, n, temperature, eps", [(0, 8, 2.0, 0.1), (1, 12, 0.3, 0.2), (2, 10, 3.0, 0.4)])
def test_bound_holds_against_exact_flow(seed, n, temperature, eps):
    attn = attention(4, n, temperature, seed)
    exact = attention_flow(attn, output_tokens=[0, n - 1])
    approx = bounded_attention_flow(attn, eps=eps, output_tokens=[0, n - 1])
    error = float((approx.values - exact).abs().max())
    assert error <= approx.error_bound + 1e-6
    assert torch.allclose(approx.values.sum(-1), torch.ones(1, 2, dtype=approx.values.dtype))


def test_no_pruning_is_exact_with_zero_bound():
    attn = attention(3, 7, 2.0, 3)
    approx = bounded_attention_flow(attn, eps=0.0, output_tokens=[0])
    assert approx.error_bound < 1e-6
    assert float((approx.values - attention_flow(attn, output_tokens=[0])).abs().max()) < 1e-6


def test_padded_tokens_stay_zero():
    attn = attention(2, 6, 1.0, 4)
    mask = torch.tensor([[1, 1, 1, 1, 0, 0]])
    approx = bounded_attention_flow(attn, eps=0.1, output_tokens=[0], attention_mask=mask)
    assert float(approx.values[0, 0, 4:].abs().max()) == 0.0


def test_cost_estimate_counts_max_flows():
    assert flow_cost_estimate(128, 6, 1)["max_flows"] == 128
    assert flow_cost_estimate(128, 6, 128)["max_flows"] == 128 * 128
    assert flow_cost_estimate(128, 6, 128)["seconds"] == pytest.approx(128 * flow_cost_estimate(128, 6, 1)["seconds"])


@pytest.mark.parametrize("eps", [-0.1, 1.0])
def test_bad_eps_is_an_input_error(eps):
    with pytest.raises(InputError):
        bounded_attention_flow(attention(2, 4, 1.0, 0), eps=eps)


def test_bad_cost_estimate_is_an_input_error():
    with pytest.raises(InputError):
        flow_cost_estimate(0, 6, 1)
