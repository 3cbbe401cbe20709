"""Family facts: explained rows, token layout of vision models, patch order, decoder-to-source orientation."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from rollout_core.explain import decoder_to_source
from rollout_core.models import families


def test_row_weights_by_hand():
    real = torch.tensor([[True, True, True, False], [True, True, True, True]])
    assert families.row_weights("first", real).tolist() == [[1, 0, 0, 0], [1, 0, 0, 0]]
    assert families.row_weights("last", real).tolist() == [[0, 0, 1, 0], [0, 0, 0, 1]]
    assert torch.allclose(families.row_weights("mean", real),
                          torch.tensor([[1 / 3, 1 / 3, 1 / 3, 0], [0.25] * 4], dtype=torch.float64))
    patches = torch.tensor([2, 3])
    assert families.row_weights("patch-mean", real, patches).tolist()[1] == [0, 0, 0.5, 0.5]
    assert families.row_weights("first+patch-mean", real, patches).tolist()[1] == [0.5, 0, 0.25, 0.25]
    assert families.row_weights("prefix-mean", real).tolist()[0] == [0.5, 0.5, 0, 0]


def test_image_layouts(tiny_handle):
    deit = families.image_layout(tiny_handle("deit").config, 32, 48)
    assert deit.prefix_names == ("[CLS]", "[DIST]") and deit.grid == (4, 6)
    assert deit.patch_positions.tolist() == list(range(2, 26))
    regs = families.image_layout(tiny_handle("dinov2-registers").config, 32, 32)
    assert regs.prefix_names == ("[CLS]", "[REG0]", "[REG1]") and regs.num_tokens == 19
    assert regs.tokens()[3] == "patch 0,0" and regs.tokens()[-1] == "patch 3,3"


def test_patch_positions_follow_image_rows(tiny_handle):
    """Token k of a non-square input is the patch at (k // cols, k % cols) of the processed image:
    the ViT patch embedding of each token equals the convolution applied to that image crop."""
    handle = tiny_handle("vit-wide")
    pixels = torch.randn(1, 3, 32, 48)
    layout = families.image_layout(handle.config, 32, 48)
    rows, cols = layout.grid
    assert (rows, cols) == (4, 6)
    conv = handle.model.vit.embeddings.patch_embeddings.projection
    with torch.no_grad():
        tokens = handle.model.vit.embeddings.patch_embeddings(pixels)[0]
        for k in range(rows * cols):
            r, c = divmod(k, cols)
            crop = pixels[0, :, 8 * r : 8 * r + 8, 8 * c : 8 * c + 8]
            expected = torch.einsum("ochw,chw->o", conv.weight, crop) + conv.bias
            assert torch.allclose(tokens[k], expected, atol=1e-5), (k, r, c)


def _stochastic(generator: torch.Generator, *shape: int) -> torch.Tensor:
    x = torch.rand(*shape, generator=generator, dtype=torch.float64) + 0.05
    return x / x.sum(-1, keepdim=True)


def test_decoder_to_source_matches_a_linear_network():
    """Decoder layer l: d <- Ã_l d (self-attention), then d <- d + C_l h (cross-attention), no MLP/norm.
    The encoder content of the decoder output is S h; decoder_to_source must return S / L."""
    g = torch.Generator().manual_seed(0)
    m, n, dim, layers = 4, 5, 3, 3
    selfs = [_stochastic(g, 1, 1, m, m) for _ in range(layers)]
    cross = [_stochastic(g, 1, 1, m, n) for _ in range(layers)]
    h = torch.randn(n, dim, generator=g, dtype=torch.float64)
    d = torch.zeros(m, dim, dtype=torch.float64)  # decoder inputs carry no source content
    for a, c in zip(selfs, cross):
        d = a[0, 0] @ d  # residual_weight=0: Ã = A
        d = d + c[0, 0] @ h
    s = decoder_to_source(selfs, cross, residual_weight=0.0)[0]
    assert torch.allclose(s * layers @ h, d, atol=1e-10)
    assert torch.allclose(s.sum(-1), torch.ones(m, dtype=torch.float64))


def test_decoder_to_source_orientation_is_r_dec_times_c():
    """Cross-attention in layer 1, self-attention after it in layer 2: R_dec · C, and R_decᵀ · C differs."""
    g = torch.Generator().manual_seed(1)
    m, n = 4, 3
    c = _stochastic(g, 1, 1, m, n)
    a2 = _stochastic(g, 1, 1, m, m)
    zero_cross = torch.zeros(1, 1, m, n, dtype=torch.float64)
    identity = torch.eye(m, dtype=torch.float64).view(1, 1, m, m)
    s = decoder_to_source([identity, a2], [c, zero_cross], residual_weight=0.0)[0] * 2
    assert torch.allclose(s, a2[0, 0] @ c[0, 0], atol=1e-12)
    assert not torch.allclose(s, a2[0, 0].T @ c[0, 0], atol=1e-3)


@pytest.mark.parametrize("model_type, words", [
    ("swin", "local windows"), ("resnet", "no self-attention"), ("funnel", "number of tokens"),
])
def test_refusals_say_why(model_type, words):
    from transformers import AutoConfig

    with pytest.raises(Exception, match=words):
        families.check_supported(AutoConfig.for_model(model_type))


def test_every_listed_pooling_is_described():
    for spec in families.FAMILIES.values():
        assert spec.head_pooling in families.POOLINGS
    assert np.all([p in families.POOLINGS for p in ("mean", "last", "patch-mean", "prefix-mean")])
