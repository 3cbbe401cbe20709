"""Attention rollout against hand-computed cases, a linear attention-only network and a naive loop."""
from fractions import Fraction as F

import numpy as np
import pytest
import torch

from rollout_core.errors import InputError
from rollout_core.maths.fusion import fuse_heads
from rollout_core.maths.rollout import attention_rollout, augment_layer, layer_attention, rollout_rows


def t(rows):
    """Fractions -> a (1, H, n, n) float64 attention tensor; `rows` is a list of heads."""
    return torch.tensor([[[float(v) for v in r] for r in head] for head in rows], dtype=torch.float64)[None]


A1 = [[F(1, 2), F(1, 2), 0], [0, 1, 0], [F(1, 4), F(1, 4), F(1, 2)]]
A2 = [[0, 1, 0], [F(1, 2), 0, F(1, 2)], [0, 0, 1]]
B = [[0, 0, 1], [1, 0, 0], [0, 1, 0]]


def close(tensor, expected):
    expected = torch.tensor([[float(v) for v in r] for r in expected], dtype=tensor.dtype)
    assert torch.allclose(tensor, expected, atol=1e-12)


def test_two_layers_by_hand_paper_residual():
    # Ã1 = (A1+I)/2, Ã2 = (A2+I)/2, R = Ã2 Ã1 worked out by hand.
    R = attention_rollout([t([A1]), t([A2])])[0]
    close(R, [[F(3, 8), F(5, 8), 0], [F(7, 32), F(19, 32), F(6, 32)], [F(1, 8), F(1, 8), F(3, 4)]])


@pytest.mark.parametrize(
    "fusion, residual, expected",
    [
        ("max", 1.0, [[F(1, 2), F(1, 6), F(1, 3)], [F(1, 3), F(2, 3), 0], [F(1, 11), F(4, 11), F(6, 11)]]),
        ("min", 1.0, [[1, 0, 0], [0, 1, 0], [0, F(1, 5), F(4, 5)]]),
        ("mean", 0.5, [[F(1, 2), F(1, 6), F(1, 3)], [F(1, 3), F(2, 3), 0], [F(1, 12), F(5, 12), F(1, 2)]]),
    ],
)
def test_head_fusion_and_residual_by_hand(fusion, residual, expected):
    close(attention_rollout([t([A1, B])], head_fusion=fusion, residual_weight=residual)[0], expected)


def test_residual_zero_is_raw_attention_product():
    R = attention_rollout([t([A1]), t([A2])], residual_weight=0.0)[0]
    expected = np.array(A2, dtype=float) @ np.array(A1, dtype=float)
    assert np.allclose(R.numpy(), expected)


def test_discard_ratio_by_hand():
    # 6 off-diagonal candidates, floor(6 * 0.67) = 4 dropped: the three zeros and (2,0) (stable tie order).
    R = attention_rollout([t([A1])], discard_ratio=0.67)[0]
    close(R, [[F(3, 4), F(1, 4), 0], [0, 1, 0], [0, F(1, 7), F(6, 7)]])


def random_attention(layers, batch, heads, n, seed=0, dtype=torch.float64):
    g = torch.Generator().manual_seed(seed)
    return [torch.softmax(torch.randn(batch, heads, n, n, generator=g, dtype=dtype) * 2, dim=-1) for _ in range(layers)]


def test_linear_attention_network_mixing_matrix_is_the_rollout():
    """h_l = Ã_l h_(l-1), no MLP: the end-to-end map h_0 -> h_L is exactly the rollout, not its reverse."""
    n, d, layers = 5, 8, 4
    attn = random_attention(layers, 1, 3, n, seed=1)
    augmented = [(a[0].mean(0) + torch.eye(n, dtype=torch.float64)) / 2 for a in attn]
    h0 = torch.randn(n, d, dtype=torch.float64, generator=torch.Generator().manual_seed(2))
    h = h0
    for layer in augmented:  # run the network
        h = layer @ h
    mixing = h @ torch.linalg.pinv(h0)  # h_L = M h_0 with h_0 of full row rank
    R = attention_rollout(attn)[0]
    assert torch.allclose(R, mixing, atol=1e-10)
    reversed_order = attention_rollout(attn[::-1])[0]
    assert not torch.allclose(reversed_order, mixing, atol=1e-3)


def naive_rollout(attn_sample, n_real, fusion, residual, discard=0.0):
    """Per-sample reference in plain numpy loops over the real tokens only."""
    result = np.eye(n_real)
    for layer in attn_sample:  # layer: (H, n, n) numpy
        fused = np.zeros((n_real, n_real))
        for i in range(n_real):
            for j in range(n_real):
                values = [layer[h, i, j] for h in range(layer.shape[0])]
                fused[i, j] = {"mean": np.mean, "max": np.max, "min": np.min}[fusion](values)
        off_diagonal = sorted((fused[i, j], i, j) for i in range(n_real) for j in range(n_real) if i != j)
        for _, i, j in off_diagonal[: int(len(off_diagonal) * discard)]:
            fused[i, j] = 0.0
        aug = fused + residual * np.eye(n_real)
        for i in range(n_real):
            aug[i] /= aug[i].sum()
        result = aug @ result
    return result


@pytest.mark.parametrize("fusion, discard", [("mean", 0.0), ("max", 0.0), ("min", 0.0), ("mean", 0.6), ("max", 0.3)])
def test_batch_with_padding_matches_naive_loop_and_one_by_one(fusion, discard):
    n, lengths = 7, [7, 4, 5]
    attn = random_attention(3, len(lengths), 2, n, seed=3)
    mask = torch.zeros(len(lengths), n)
    for b, length in enumerate(lengths):
        mask[b, :length] = 1
        for a in attn:  # a masked softmax gives real queries zero weight on padded keys
            a[b, :, :length, length:] = 0
            a[b, :, :length, :length] /= a[b, :, :length, :length].sum(-1, keepdim=True)
    options = {"head_fusion": fusion, "residual_weight": 0.7, "discard_ratio": discard}
    R = attention_rollout(attn, attention_mask=mask, **options)
    for b, length in enumerate(lengths):
        expected = naive_rollout([a[b].numpy() for a in attn], length, fusion, 0.7, discard)
        assert np.allclose(R[b, :length, :length].numpy(), expected, atol=1e-10)
        assert torch.all(R[b, length:, :] == 0) and torch.all(R[b, :, length:] == 0)
        alone = attention_rollout([a[b : b + 1, :, :length, :length] for a in attn], **options)
        assert torch.allclose(R[b, :length, :length], alone[0], atol=1e-12)


def test_all_layers_slicing_and_rows():
    attn = random_attention(5, 2, 3, 6, seed=4)
    every = attention_rollout(attn, all_layers=True)
    assert every.shape == (5, 2, 6, 6)
    assert torch.allclose(every[-1], attention_rollout(attn))
    assert torch.allclose(attention_rollout(attn, start_layer=1, end_layer=4), attention_rollout(attn[1:4]))
    stacked = torch.stack(attn)
    assert torch.allclose(attention_rollout(stacked, start_layer=2), attention_rollout(attn[2:]))
    rows = rollout_rows(attn, [0, 3], all_layers=True)
    assert torch.allclose(rows, every[:, :, [0, 3]], atol=1e-12)
    uniform = torch.full((1, 6), 1 / 6, dtype=torch.float64)
    assert torch.allclose(rollout_rows(attn, uniform)[:, 0], attention_rollout(attn).mean(dim=1), atol=1e-12)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32])
def test_never_nan_or_inf_on_hard_settings(dtype):
    attn = random_attention(64, 2, 4, 9, seed=5, dtype=torch.float32)
    attn = [a.to(dtype) for a in attn]
    mask = torch.tensor([[1] * 9, [1] * 6 + [0] * 3])
    for options in ({"discard_ratio": 0.99, "residual_weight": 0.0}, {"residual_weight": 0.0}, {"discard_ratio": 0.9}):
        R = attention_rollout(attn, attention_mask=mask, **options)
        assert R.dtype == torch.float32
        assert torch.isfinite(R).all()
        real_rows = R[mask.bool()]
        assert torch.allclose(real_rows.sum(-1), torch.ones(real_rows.shape[0]), atol=1e-4)


def test_all_discarded_row_falls_back_to_identity():
    # floor(2 * 0.99) = 1 of the 2 off-diagonal entries is dropped: (0, 1), the first in stable order.
    fused = torch.tensor([[[0.0, 1.0], [1.0, 0.0]]])
    out = augment_layer(fused, residual_weight=0.0, discard_ratio=0.99)
    assert torch.equal(out[0], torch.tensor([[1.0, 0.0], [1.0, 0.0]]))


def test_layer_attention_is_masked_and_row_normalised():
    attn = random_attention(2, 1, 2, 4, seed=6)
    raw = layer_attention(attn, attention_mask=torch.tensor([[1, 1, 1, 0]]))
    assert raw.shape == (2, 1, 4, 4)
    assert torch.all(raw[:, 0, 3] == 0) and torch.all(raw[:, 0, :, 3] == 0)
    assert torch.allclose(raw[:, 0, :3].sum(-1), torch.ones(2, 3, dtype=torch.float64))
    fused = attn[0][0].mean(0)[:3, :3]
    assert torch.allclose(raw[0, 0, :3, :3], fused / fused.sum(-1, keepdim=True))


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"discard_ratio": 1.0}, "discard_ratio"),
        ({"residual_weight": -1.0}, "residual_weight"),
        ({"residual_weight": float("nan")}, "residual_weight"),
        ({"residual_weight": "half"}, "numbers"),
        ({"start_layer": 3}, "selects no layer"),
        ({"head_fusion": "median"}, "head fusion"),
    ],
)
def test_bad_options_are_clear_input_errors(kwargs, message):
    with pytest.raises(InputError, match=message):
        attention_rollout(random_attention(2, 1, 2, 3), **kwargs)


def test_ragged_layers_and_missing_weights_are_refused():
    with pytest.raises(InputError, match="different shapes"):
        attention_rollout([torch.ones(1, 2, 3, 3), torch.ones(1, 2, 4, 4)])
    with pytest.raises(InputError, match="eager"):
        attention_rollout([torch.ones(1, 2, 3, 3), None])


def test_fuse_heads_matches_numpy():
    attn = random_attention(1, 2, 5, 4, seed=7)[0]
    for how, fn in (("mean", np.mean), ("max", np.max), ("min", np.min)):
        assert np.allclose(fuse_heads(attn, how).numpy(), fn(attn.numpy(), axis=1))


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no GPU on this machine")
def test_cuda_matches_cpu():
    attn = random_attention(3, 2, 2, 5, seed=8)
    assert torch.allclose(attention_rollout([a.cuda() for a in attn]).cpu(), attention_rollout(attn))


@pytest.mark.parametrize(
    "fusion, residual, expected",
    [
        # max: fused1 = [[1/2,1/2,1],[1,1,0],[1/4,1,1/2]] -> Ã1 = [[1/2,1/6,1/3],[1/3,2/3,0],[1/11,4/11,6/11]]
        #      fused2 = [[0,1,1],[1,0,1/2],[0,1,1]]     -> Ã2 = [[1/3,1/3,1/3],[2/5,2/5,1/5],[0,1/3,2/3]]
        ("max", 1.0, [[F(61, 198), F(79, 198), F(29, 99)], [F(58, 165), F(67, 165), F(8, 33)],
                      [F(17, 99), F(46, 99), F(4, 11)]]),
        # min, w = 1/2: fused1 = [[0,0,0],[0,0,0],[0,1/4,1/2]] -> Ã1 = [[1,0,0],[0,1,0],[0,1/3,2/3]]
        #               fused2 = [[0,0,0],[1/2,0,0],[0,0,1]]   -> Ã2 = [[1,0,0],[1/2,1/2,0],[0,0,1]]
        ("min", 0.5, [[1, 0, 0], [F(1, 2), F(1, 2), 0], [0, F(1, 3), F(2, 3)]]),
    ],
)
def test_two_layer_fusions_by_hand(fusion, residual, expected):
    R = attention_rollout([t([A1, B]), t([A2, B])], head_fusion=fusion, residual_weight=residual)[0]
    close(R, expected)


def test_layer_indices_accept_integer_likes_and_refuse_floats():
    attn = random_attention(3, 1, 2, 4, seed=9)
    assert torch.equal(attention_rollout(attn, start_layer=np.int64(1)), attention_rollout(attn, start_layer=1))
    with pytest.raises(InputError, match="integers"):
        attention_rollout(attn, start_layer=1.0)
    with pytest.raises(InputError, match="discard_ratio"):
        attention_rollout(attn, discard_ratio=-0.1)
    with pytest.raises(InputError, match="attention_mask"):
        attention_rollout(attn, attention_mask=torch.ones(1, 3))
    with pytest.raises(InputError, match="heads"):
        fuse_heads(torch.ones(3, 3))


def test_rows_equal_full_rollout_rows_with_padding_discard_and_layer_range():
    attn = random_attention(6, 2, 3, 7, seed=10)
    options = {"attention_mask": torch.tensor([[1] * 7, [1] * 5 + [0] * 2]), "discard_ratio": 0.4,
               "residual_weight": 0.5, "head_fusion": "max", "start_layer": 1, "end_layer": -1}
    every = attention_rollout(attn, all_layers=True, **options)
    assert every.shape == (4, 2, 7, 7)
    assert torch.allclose(rollout_rows(attn, [0, 6], all_layers=True, **options), every[:, :, [0, 6]], atol=1e-12)
    assert torch.allclose(rollout_rows(attn, [2], **options), every[-1][:, [2]], atol=1e-12)


def test_discard_in_chunks_equals_one_sample_at_a_time(monkeypatch):
    import rollout_core.maths.rollout as rollout

    monkeypatch.setattr(rollout, "SORT_CHUNK_ENTRIES", 2 * 6 * 6)  # two 6 x 6 matrices ranked at a time
    fused = random_attention(1, 5, 1, 6, seed=11)[0][:, 0]
    mask = torch.tensor([[1] * 6, [1] * 4 + [0] * 2, [1] * 6, [1] * 5 + [0], [1] * 6])
    batched = augment_layer(fused, discard_ratio=0.5, attention_mask=mask, residual_weight=0.0)
    for b in range(5):
        real = int(mask[b].sum())
        alone = augment_layer(fused[b : b + 1, :real, :real], discard_ratio=0.5, residual_weight=0.0)
        assert torch.equal(batched[b, :real, :real], alone[0])
