"""Row-only streaming (long decoders): each layer's Ã spilled to disk by query blocks, the explained rows of
every layer computed from the top down. Checked against the plain path (`output_attentions=True` +
`attention_rollout`, all layers), a naive loop from the definition and a 2-layer case worked by hand, on a
tiny Llama-style causal LM with grouped-query attention (4 query heads over 2 KV heads)."""
from __future__ import annotations

import os
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

os.environ.setdefault("HF_HUB_OFFLINE", "1")

transformers = pytest.importorskip("transformers")

from rollout_core import explain_text  # noqa: E402
from rollout_core.errors import InputError, UnsupportedModelError  # noqa: E402
from rollout_core.lowmem import spill as spill_module  # noqa: E402
from rollout_core.lowmem import streaming_rollout  # noqa: E402
from rollout_core.lowmem.accumulator import Accumulator  # noqa: E402
from rollout_core.maths.rollout import attention_rollout, layer_attention  # noqa: E402
from rollout_core.models.loading import load_model  # noqa: E402
from tiny_models import build_tiny  # noqa: E402

ATOL = 1e-5


@pytest.fixture(scope="module")
def llama() -> torch.nn.Module:
    torch.manual_seed(1)
    config = transformers.LlamaConfig(hidden_size=32, intermediate_size=64, num_attention_heads=4,
                                      num_key_value_heads=2, num_hidden_layers=3, vocab_size=60,
                                      max_position_embeddings=64)
    model = transformers.LlamaForCausalLM(config)
    model.config._attn_implementation = "eager"
    return model.eval()


@pytest.fixture(autouse=True)
def spill_dir(tmp_path, monkeypatch) -> Path:
    """Layer files go to a folder of the test; reads come in blocks of 3 rows (several blocks per layer)."""
    folder = tmp_path / "spill"
    folder.mkdir()
    monkeypatch.setenv(spill_module.SPILL_DIR_ENV, str(folder))
    monkeypatch.setattr(spill_module, "READ_BYTES", 3 * 24 * 4)
    return folder


def _handle(model: torch.nn.Module) -> SimpleNamespace:
    return SimpleNamespace(model=model, device=torch.device("cpu"))


def _batch() -> dict[str, torch.Tensor]:
    """Two sequences of 24 positions, the second right-padded after 17."""
    torch.manual_seed(5)
    ids = torch.randint(3, 60, (2, 24))
    mask = torch.ones(2, 24, dtype=torch.long)
    mask[1, 17:] = 0
    return {"input_ids": ids, "attention_mask": mask}


def _naive_rows(attentions: tuple[torch.Tensor, ...], mask: torch.Tensor, rows: list[int]) -> torch.Tensor:
    """Definition, one sample at a time on its real tokens: mean heads, rownorm(A + I), R = Ã_l · R."""
    count, batch, n = len(attentions), mask.shape[0], mask.shape[1]
    out = torch.zeros(count, batch, len(rows), n, dtype=torch.float64)
    for b in range(batch):
        real = int(mask[b].sum())
        rollout = torch.eye(real, dtype=torch.float64)
        for l, layer in enumerate(attentions):
            fused = layer[b].double().mean(dim=0)[:real, :real] + torch.eye(real, dtype=torch.float64)
            rollout = (fused / fused.sum(dim=-1, keepdim=True)) @ rollout
            for k, row in enumerate(rows):
                if row < real:
                    out[l, b, k, :real] = rollout[row]
    return out


def test_rows_equal_the_plain_path_and_the_definition(llama, spill_dir):
    inputs, rows = _batch(), [23, 16, 4]  # 23: padding in sample 2
    with torch.no_grad():
        plain_out = llama(**inputs, output_attentions=True)
    plain = attention_rollout(plain_out.attentions, attention_mask=inputs["attention_mask"], all_layers=True)
    stream = streaming_rollout(_handle(llama), inputs, rows=rows, row_only=True, spill_dtype=torch.float32)
    assert stream.matrix is None and stream.spill == {"dtype": "float32", "bytes": 3 * 2 * 24 * 24 * 4}
    torch.testing.assert_close(stream.layer_rows, plain[:, :, rows], atol=ATOL, rtol=0)
    naive = _naive_rows(plain_out.attentions, inputs["attention_mask"], rows)
    torch.testing.assert_close(stream.layer_rows.double(), naive, atol=ATOL, rtol=0)
    raw = layer_attention(plain_out.attentions, attention_mask=inputs["attention_mask"])
    torch.testing.assert_close(stream.layer_attention_rows, raw[:, :, rows], atol=ATOL, rtol=0)
    torch.testing.assert_close(stream.logits, plain_out.logits, atol=1e-4, rtol=0)
    assert list(spill_dir.iterdir()) == []  # the layer files and their folder are gone


def test_layer_range_and_float16_files(llama):
    inputs = {"input_ids": _batch()["input_ids"][:1]}
    with torch.no_grad():
        attentions = llama(**inputs, output_attentions=True).attentions
    plain = attention_rollout(attentions, start_layer=1, all_layers=True)[:, :, [23]]
    full = streaming_rollout(_handle(llama), inputs, rows=[23], start_layer=1, row_only=True, spill_dtype=torch.float32)
    torch.testing.assert_close(full.layer_rows, plain, atol=ATOL, rtol=0)
    half = streaming_rollout(_handle(llama), inputs, rows=[23], start_layer=1, row_only=True, spill_dtype=torch.float16)
    assert half.spill["dtype"] == "float16"
    # float16 keeps 11 significant bits: each entry within 2^-11 relative, rows within ~1e-3
    torch.testing.assert_close(half.layer_rows, plain, atol=1e-3, rtol=0)


def test_two_layers_by_hand(spill_dir):
    """Ã = (A + I) / 2. Row 2 after layer 1 is Ã1[2]; after layer 2, 0.25·Ã1[0] + 0.75·Ã1[2]."""
    first = torch.tensor([[[1.0, 0, 0], [0.5, 0.5, 0], [0.2, 0.3, 0.5]]])
    second = torch.tensor([[[1.0, 0, 0], [1.0, 0, 0], [0.5, 0, 0.5]]])
    accumulator = Accumulator(head_fusion="mean", residual_weight=1.0, discard_ratio=0.0, num_layers=2,
                              layers=range(2), rows=[2], padding_mask=None, row_only=True)
    try:
        for layer in (first, second):  # fed in blocks of rows 0:2 and 2:3, as the attention computes them
            accumulator.add_rows(layer[:, :2], 0)
            accumulator.add_rows(layer[:, 2:], 2)
            accumulator.end_layer()
        assert len(list(next(spill_dir.iterdir()).iterdir())) == 2  # one file per layer while they are needed
        accumulator.finish()
    finally:
        accumulator.close()
    expected = torch.tensor([[0.1, 0.15, 0.75], [0.325, 0.1125, 0.5625]])
    torch.testing.assert_close(torch.stack(accumulator.layer_rows)[:, 0, 0], expected, atol=1e-7, rtol=0)
    torch.testing.assert_close(torch.stack(accumulator.layer_attention_rows)[:, 0, 0],
                               torch.tensor([[0.2, 0.3, 0.5], [0.5, 0, 0.5]]), atol=1e-7, rtol=0)
    assert list(spill_dir.iterdir()) == []


def test_files_are_removed_after_an_error(llama, spill_dir, monkeypatch):
    seen = []
    create = spill_module.Spill.create

    def spy(*args, **kwargs):
        seen.append(create(*args, **kwargs))
        return seen[-1]

    def fail(*args, **kwargs):
        assert len(list(seen[0].folder.iterdir())) == 3  # every attention ran before the last MLP failed
        raise RuntimeError("boom")

    monkeypatch.setattr(spill_module.Spill, "create", staticmethod(spy))
    monkeypatch.setattr(llama.model.layers[2].mlp, "forward", fail)
    with pytest.raises(UnsupportedModelError, match="boom"):
        streaming_rollout(_handle(llama), {"input_ids": _batch()["input_ids"]}, rows=[3], row_only=True)
    assert seen and list(spill_dir.iterdir()) == []


def test_chosen_when_the_full_matrix_exceeds_the_budget(llama, monkeypatch):
    inputs = {"input_ids": _batch()["input_ids"][:1]}
    assert streaming_rollout(_handle(llama), inputs, rows=[5]).matrix is not None
    monkeypatch.setenv("ROLLOUT_MEMORY_BUDGET_MB", "0.001")  # 1 KiB: 4 matrices of 24² floats need 9 KiB
    chosen = streaming_rollout(_handle(llama), inputs, rows=[5])
    assert chosen.matrix is None and chosen.spill["dtype"] == "float32"  # float32: plenty of disk
    with pytest.raises(InputError, match="discard_ratio 0"):
        streaming_rollout(_handle(llama), inputs, rows=[5], discard_ratio=0.5)


def test_explanation_says_the_matrix_is_not_available(tmp_path, monkeypatch):
    handle = load_model(build_tiny("llama", tmp_path / "llama"))
    text = "the movie was good but the plot was boring"
    full = explain_text(handle, text, capture="lowmem")
    monkeypatch.setenv("ROLLOUT_MEMORY_BUDGET_MB", "0.0001")
    rows = explain_text(handle, text, capture="lowmem")
    assert rows.matrix is None and full.matrix is not None
    assert rows.settings["lowmem_mode"] == "rows only" and "not available" in rows.settings["matrix_note"]
    assert "lowmem_mode" not in full.settings
    assert rows.scores == pytest.approx(full.scores, abs=ATOL)
    assert rows.layer_scores == pytest.approx(full.layer_scores, abs=ATOL)


def test_unpadded_causal_input_gets_no_mask_tensor(llama, monkeypatch):
    """Eager's float mask is n x n per sample (4 GiB at 32k): row-only mode applies the causal rule by blocks."""
    from rollout_core.lowmem import paths

    masks, original = [], paths.stream_attention

    def spy(module, query, key, value, attention_mask, *args, **kwargs):
        masks.append(attention_mask)
        return original(module, query, key, value, attention_mask, *args, **kwargs)

    monkeypatch.setattr(paths, "stream_attention", spy)
    inputs = {"input_ids": _batch()["input_ids"][:1]}
    streaming_rollout(_handle(llama), inputs, rows=[5], row_only=True)
    assert len(masks) == 3 and all(mask is None for mask in masks)
    streaming_rollout(_handle(llama), inputs, rows=[5], row_only=False)
    assert all(mask is not None and mask.is_floating_point() for mask in masks[3:])
