"""Gradient-weighted rollout (Chefer et al. 2021) on hand-derived cases."""
import torch

from rollout_core.maths.gradient import gradient_rollout


def one_head(rows):
    return torch.tensor(rows, dtype=torch.float64)[None, None]


A1, G1 = one_head([[0.6, 0.4], [0.3, 0.7]]), one_head([[1.0, -1.0], [2.0, 0.0]])
A2, G2 = one_head([[0.5, 0.5], [1.0, 0.0]]), one_head([[0.0, 2.0], [1.0, 1.0]])


def test_two_layers_by_hand():
    # C1 = (G1*A1)+ = [[.6,0],[.6,0]]; R1 = I + C1 = [[1.6,0],[.6,1]]
    # C2 = (G2*A2)+ = [[0,1],[1,0]];   R2 = R1 + C2 R1 = [[2.2,1],[2.2,1]]
    R = gradient_rollout([A1, A2], [G1, G2])[0]
    assert torch.allclose(R, torch.tensor([[2.2, 1.0], [2.2, 1.0]], dtype=torch.float64))


def test_gradients_must_be_paired_with_their_own_layer():
    right = gradient_rollout([A1, A2], [G1, G2])
    zipped_wrong = gradient_rollout([A1, A2], [G2, G1])
    assert not torch.allclose(right, zipped_wrong)


def test_changes_with_the_target_class_gradient():
    other = [-G1, -G2]  # the gradient of another class score
    assert not torch.allclose(gradient_rollout([A1, A2], [G1, G2]), gradient_rollout([A1, A2], other))


def test_heads_are_averaged_after_clamping_and_padding_is_zero():
    attn = torch.tensor([[[[0.5, 0.5, 0.0], [0.5, 0.5, 0.0], [0.3, 0.3, 0.4]],
                          [[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.3, 0.3, 0.4]]]], dtype=torch.float64)
    grad = torch.tensor([[[[1.0, -1.0, 5.0], [1.0, 1.0, 5.0], [5.0, 5.0, 5.0]],
                          [[-1.0, 1.0, 5.0], [1.0, 1.0, 5.0], [5.0, 5.0, 5.0]]]], dtype=torch.float64)
    R = gradient_rollout([attn], [grad], attention_mask=torch.tensor([[1, 1, 0]]))[0]
    # head 1 (+): [[.5,0],[.5,.5]], head 2 (+): [[0,0],[0,1]] -> mean [[.25,0],[.25,.75]]
    assert torch.allclose(R[:2, :2], torch.tensor([[1.25, 0.0], [0.25, 1.75]], dtype=torch.float64))
    assert torch.all(R[2] == 0) and torch.all(R[:, 2] == 0)


def test_all_layers_history():
    history = gradient_rollout([A1, A2], [G1, G2], all_layers=True)
    assert history.shape == (2, 1, 2, 2)
    assert torch.allclose(history[0, 0], torch.tensor([[1.6, 0.0], [0.6, 1.0]], dtype=torch.float64))


def test_padded_batch_equals_one_by_one_and_float32_accumulation():
    g = torch.Generator().manual_seed(0)
    attn = [torch.softmax(torch.randn(2, 3, 5, 5, generator=g), -1) for _ in range(3)]
    grads = [torch.randn(2, 3, 5, 5, generator=g) for _ in range(3)]
    mask = torch.tensor([[1, 1, 1, 1, 1], [1, 1, 1, 0, 0]])
    batched = gradient_rollout([a.half() for a in attn], [d.half() for d in grads], attention_mask=mask)
    assert batched.dtype == torch.float32
    alone = gradient_rollout([a[1:, :, :3, :3].half() for a in attn], [d[1:, :, :3, :3].half() for d in grads])
    assert torch.allclose(batched[1, :3, :3], alone[0])
    assert torch.all(batched[1, 3:] == 0) and torch.all(batched[1, :, 3:] == 0)
    first = gradient_rollout([a[:1].half() for a in attn], [d[:1].half() for d in grads])
    assert torch.allclose(batched[0], first[0])
