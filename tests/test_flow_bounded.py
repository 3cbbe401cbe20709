"""Mass-pruned attention flow: its reported bound holds against exact flow; pruning keeps the stated mass."""
import numpy as np
import pytest
import torch

from rollout_core.errors import InputError
from rollout_core.maths.flow import attention_flow, pooled_attention_flow
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


@pytest.mark.parametrize("temperature, eps", [(0.1, 0.4), (0.1, 0.49), (3.0, 0.2), (3.0, 0.45)])
@pytest.mark.parametrize("seed", [11, 12])
def test_bound_holds_on_diffuse_and_peaky_graphs_rows_and_pooled(temperature, eps, seed):
    """Near-uniform (temperature 0.1) and peaky (3.0) softmax, 5 layers of 14 tokens, batch of 2."""
    g = torch.Generator().manual_seed(seed)
    attn = torch.softmax(torch.randn(5, 2, 2, 14, 14, generator=g, dtype=torch.float64) * temperature, -1)
    exact = attention_flow(attn, output_tokens=[0, 5])
    rows = bounded_attention_flow(attn, eps=eps, output_tokens=[0, 5])
    assert float((rows.values - exact).abs().max()) <= rows.error_bound + 1e-6
    weights = torch.rand(2, 14, generator=g, dtype=torch.float64)
    pooled_exact = pooled_attention_flow(attn, weights)
    pooled = bounded_attention_flow(attn, eps=eps, weights=weights)
    assert float((pooled.values[:, 0] - pooled_exact).abs().max()) <= pooled.error_bound + 1e-6


def test_pruning_loses_flow_and_the_bound_says_so():
    """The bound is not trivially 0: pruning half the mass of peaky graphs loses flow and says so."""
    attn = attention(4, 10, 3.0, 5)
    approx = bounded_attention_flow(attn, eps=0.5, output_tokens=[0])
    exact = attention_flow(attn, output_tokens=[0])
    assert 0 < float((approx.values - exact).abs().max()) <= approx.error_bound + 1e-6


def test_explain_flow_holds_the_explained_row_unless_the_full_matrix_is_asked(tiny_handle):
    from rollout_core.explain import explain_image, explain_text
    from rollout_core.methods.flow import describe

    handle = tiny_handle("bert")
    row = explain_text(handle, "the cat sat on the mat", method="flow")
    assert row.matrix is None and row.settings["flow_rows"] == "explained row only"
    n, layers = len(row.tokens), handle.num_layers
    assert row.settings["flow_full_matrix_cost"]["max_flows"] == n * n
    assert not row.settings["flow_approximate"] and "exact; explained row only" in describe(row.settings)
    full = explain_text(handle, "the cat sat on the mat", method="flow", full_matrix=True)
    assert full.matrix.shape == (n, n) and full.settings["flow_rows"] == "all rows (full matrix)"
    assert np.allclose(full.matrix[0], row.scores, atol=1e-6)  # BERT explains the [CLS] row
    assert np.allclose(full.matrix.sum(-1), 1.0, atol=1e-6) and layers >= 1
    image = explain_image(tiny_handle("vit"), np.zeros((32, 32, 3), dtype=np.uint8) + 100, method="flow")
    assert image.settings["flow_approximate"] and image.settings["flow_error_bound"] == 0.0  # 2 layers: none pruned
    assert "attention flow: exact here (each row pruned to 80% of its mass; the error bound is 0)" \
        in describe(image.settings)


def test_the_bound_is_also_given_as_a_share_of_the_maps_largest_value(tiny_handle, monkeypatch):
    from rollout_core.explain import explain_image
    from rollout_core.maths import flow_bounded
    from rollout_core.methods.flow import describe

    real, largest = flow_bounded.bounded_attention_flow, []

    def with_bound(*args, **kwargs):  # the real rows, with a bound of 1e-3 as a deeper model's pruning would give
        result = real(*args, **kwargs)
        largest.append(float(result.values[:, 0].amax(-1).min()))
        return flow_bounded.FlowResult(result.values, 1e-3)

    monkeypatch.setattr(flow_bounded, "bounded_attention_flow", with_bound)
    image = explain_image(tiny_handle("vit"), np.zeros((32, 32, 3), dtype=np.uint8) + 100, method="flow")
    share = image.settings["flow_error_share"]
    assert len(largest) == tiny_handle("vit").num_layers and share == pytest.approx(max(1e-3 / m for m in largest))
    assert f"attention flow: approximate (error <= 1.0e-03, {share:.1%} of the map's largest value; each row " \
           "pruned to 80% of its mass)" in describe(image.settings)


def test_a_bound_above_the_map_says_the_map_is_not_meaningful(tiny_handle, monkeypatch):
    from rollout_core.explain import explain_image
    from rollout_core.maths import flow_bounded
    from rollout_core.methods.flow import describe

    real = flow_bounded.bounded_attention_flow

    def huge_bound(*args, **kwargs):  # a bound larger than every value of the map
        result = real(*args, **kwargs)
        return flow_bounded.FlowResult(result.values, 10.0 * float(result.values.abs().max()))

    monkeypatch.setattr(flow_bounded, "bounded_attention_flow", huge_bound)
    image = explain_image(tiny_handle("vit"), np.zeros((32, 32, 3), dtype=np.uint8) + 100, method="flow")
    assert image.settings["flow_error_share"] >= 1.0
    assert "attention flow: not meaningful here (error bound" in describe(image.settings)
    assert any(note.startswith("Attention flow is not meaningful here") for note in image.warnings)
