"""Low-memory (streaming) rollout against the plain path and against a naive reference.

Tiny random models are built from transformers configs (hidden 32, 2-3 layers). The plain path is
`output_attentions=True` + `attention_rollout`; the naive reference below is a loop written from the
definition (mean heads, rownorm(A + w·I), R = Ã_l · R), independent of rollout_core.maths.
"""
from __future__ import annotations

import os
import threading
from types import SimpleNamespace

import pytest
import torch

os.environ.setdefault("HF_HUB_OFFLINE", "1")

transformers = pytest.importorskip("transformers")

from rollout_core.errors import InputError, UnsupportedModelError  # noqa: E402
from rollout_core.lowmem import (  # noqa: E402
    STREAM_IMPLEMENTATION,
    estimate_full_capture_bytes,
    memory_budget_bytes,
    streaming_rollout,
    uses_attention_interface,
)
from rollout_core.lowmem.paths import streaming_implementation  # noqa: E402
from rollout_core.maths.rollout import attention_rollout, layer_attention  # noqa: E402
from tiny_models import IMAGE_FAMILIES, TEXT_FAMILIES, build_tiny  # noqa: E402

ATOL = 2e-5


def _handle(model: torch.nn.Module) -> SimpleNamespace:
    return SimpleNamespace(model=model, device=torch.device("cpu"))


TINY = dict(hidden_size=32, intermediate_size=64, num_attention_heads=4, attn_implementation="eager")
TEXT = dict(vocab_size=60, max_position_embeddings=64)


def _tiny(model_class: str, config_class: str, seed: int, **config) -> torch.nn.Module:
    """A random-weight model from a config, in eval mode with eager attention."""
    torch.manual_seed(seed)
    model = getattr(transformers, model_class)(getattr(transformers, config_class)(**TINY, **config))
    model.config._attn_implementation = "eager"
    return model.eval()


@pytest.fixture(scope="module")
def bert():
    return _tiny("BertForSequenceClassification", "BertConfig", 0, num_hidden_layers=3, num_labels=2, **TEXT)


@pytest.fixture(scope="module")
def llama():
    return _tiny("LlamaForCausalLM", "LlamaConfig", 1, num_hidden_layers=3, num_key_value_heads=2, **TEXT)


@pytest.fixture(scope="module")
def vit():
    return _tiny("ViTForImageClassification", "ViTConfig", 2, image_size=32, patch_size=8, num_hidden_layers=2,
                 num_labels=3)


@pytest.fixture(scope="module")
def deberta():
    return _tiny("DebertaV2ForSequenceClassification", "DebertaV2Config", 3, num_hidden_layers=2, num_labels=2,
                 **TEXT)


def _text_batch() -> dict[str, torch.Tensor]:
    """Two sequences, the second padded after 5 tokens."""
    ids = torch.tensor([[2, 11, 12, 13, 14, 15, 16, 3], [2, 21, 22, 23, 3, 0, 0, 0]])
    mask = torch.tensor([[1] * 8, [1] * 5 + [0] * 3])
    return {"input_ids": ids, "attention_mask": mask}


def _plain(model, inputs, all_layers=False, **options):
    with torch.no_grad():
        out = model(**inputs, output_attentions=True)
    return out, attention_rollout(out.attentions, attention_mask=inputs.get("attention_mask"), all_layers=all_layers,
                                  **options)


def _naive_rollout(attentions, residual_weight=1.0):
    """Definition, one sample at a time, with plain loops over layers."""
    batch, n = attentions[0].shape[0], attentions[0].shape[-1]
    result = torch.empty(batch, n, n, dtype=torch.float64)
    for b in range(batch):
        rollout = torch.eye(n, dtype=torch.float64)
        for layer in attentions:
            fused = layer[b].double().mean(dim=0) + residual_weight * torch.eye(n, dtype=torch.float64)
            fused = fused / fused.sum(dim=-1, keepdim=True)
            rollout = fused @ rollout
        result[b] = rollout
    return result


def _same_as_plain(model, inputs, *, path, sdpa_layers, rows, logits_atol=ATOL):
    """Streaming vs plain path: same rollout, same model outputs, the expected capture path."""
    plain_out, plain = _plain(model, inputs, all_layers=True)
    stream = streaming_rollout(_handle(model), inputs, rows=rows)
    assert (stream.path, stream.sdpa_layers) == (path, sdpa_layers)
    torch.testing.assert_close(stream.matrix, plain[-1], atol=ATOL, rtol=0)
    torch.testing.assert_close(stream.layer_rows, plain[:, :, rows], atol=ATOL, rtol=0)
    raw = layer_attention(plain_out.attentions, attention_mask=inputs.get("attention_mask"))
    torch.testing.assert_close(stream.layer_attention_rows, raw[:, :, rows], atol=ATOL, rtol=0)
    torch.testing.assert_close(stream.outputs[0], plain_out[0], atol=logits_atol, rtol=0)
    return stream


def test_bert_with_padding_matches_plain_path_and_outputs(bert):
    inputs = _text_batch()
    stream = _same_as_plain(bert, inputs, path="interface", sdpa_layers=3, rows=[0, 6])  # 6: padding in sample 2
    # the padded sample gets exactly the scores it gets alone, and its padding gets nothing
    alone = streaming_rollout(_handle(bert), {k: v[1:, :5] for k, v in inputs.items()}, rows=[0])
    torch.testing.assert_close(stream.matrix[1, :5, :5], alone.matrix[0], atol=ATOL, rtol=0)
    assert torch.all(stream.matrix[1, :5, 5:] == 0)


def test_unpadded_matches_naive_definition(bert):
    inputs = {"input_ids": _text_batch()["input_ids"][:1]}
    with torch.no_grad():
        attentions = bert(**inputs, output_attentions=True).attentions
    stream = streaming_rollout(_handle(bert), inputs)
    torch.testing.assert_close(stream.matrix.double(), _naive_rollout(attentions), atol=ATOL, rtol=0)


def test_layer_rows_follow_the_cumulative_rollout(bert):
    inputs = {"input_ids": _text_batch()["input_ids"]}
    with torch.no_grad():
        attentions = bert(**inputs, output_attentions=True).attentions
    rows = [0, 3]
    stream = streaming_rollout(_handle(bert), inputs, rows=rows, start_layer=1, end_layer=3)
    assert stream.layer_rows.shape == (2, 2, 2, 8)
    for k, last in enumerate([2, 3]):
        expected = _naive_rollout(attentions[1:last])[:, rows]
        torch.testing.assert_close(stream.layer_rows[k].double(), expected, atol=ATOL, rtol=0)
        raw = attentions[last - 1].double().mean(dim=1)[:, rows]
        torch.testing.assert_close(stream.layer_attention_rows[k].double(), raw, atol=ATOL, rtol=0)
    torch.testing.assert_close(stream.layer_rows[-1], stream.matrix[:, rows], atol=0, rtol=0)


@pytest.mark.parametrize("options", [
    {"head_fusion": "max"},
    {"head_fusion": "min", "residual_weight": 0.5},
    {"discard_ratio": 0.3},
    {"start_layer": 1},
    {"end_layer": 2, "residual_weight": 0.0},
    {"start_layer": -2, "end_layer": -1},
])
def test_options_match_plain_path(bert, options):
    inputs = _text_batch()
    _, plain = _plain(bert, inputs, **options)
    stream = streaming_rollout(_handle(bert), inputs, **options)
    torch.testing.assert_close(stream.matrix, plain, atol=ATOL, rtol=0)


def test_llama_grouped_query_causal_matches_plain_path(llama):
    assert llama.config.num_key_value_heads < llama.config.num_attention_heads
    inputs = {"input_ids": torch.tensor([[5, 6, 7, 8, 9, 10], [11, 12, 13, 14, 15, 16]])}
    stream = _same_as_plain(llama, inputs, path="interface", sdpa_layers=3, rows=[5], logits_atol=1e-4)
    # causal: nothing flows from the future
    assert torch.all(torch.triu(stream.matrix, diagonal=1) == 0)


def test_llama_left_padding_matches_plain_path(llama):
    inputs = {"input_ids": torch.tensor([[0, 0, 7, 8, 9, 10], [11, 12, 13, 14, 15, 16]]),
              "attention_mask": torch.tensor([[0, 0, 1, 1, 1, 1], [1] * 6])}
    _, plain = _plain(llama, inputs)
    stream = streaming_rollout(_handle(llama), inputs, rows=[5])
    torch.testing.assert_close(stream.matrix, plain, atol=ATOL, rtol=0)


def test_vit_matches_plain_path_and_outputs(vit):
    torch.manual_seed(4)
    inputs = {"pixel_values": torch.randn(2, 3, 32, 32)}
    stream = _same_as_plain(vit, inputs, path="interface", sdpa_layers=2, rows=[0])
    assert stream.matrix.shape == (2, 17, 17)


def test_hook_path_for_inline_attention_family(deberta):
    assert not uses_attention_interface(deberta)
    stream = _same_as_plain(deberta, _text_batch(), path="hooks", sdpa_layers=0, rows=[0])
    assert stream.outputs.attentions is None or all(a is None for a in stream.outputs.attentions)
    assert not deberta._forward_hooks and all(not m._forward_hooks for m in deberta.modules())


def test_no_global_state_leaks(bert):
    from transformers.masking_utils import AttentionMaskInterface
    from transformers.modeling_utils import AttentionInterface

    streaming_rollout(_handle(bert), _text_batch())
    assert STREAM_IMPLEMENTATION not in AttentionInterface._global_mapping
    assert STREAM_IMPLEMENTATION not in AttentionMaskInterface._global_mapping
    assert all(m.config._attn_implementation == "eager" for m in bert.modules() if hasattr(m, "config"))
    with pytest.raises(InputError):  # raised by augment_layer inside the forward, at the first layer
        streaming_rollout(_handle(bert), _text_batch(), discard_ratio=1.5)
    assert STREAM_IMPLEMENTATION not in AttentionInterface._global_mapping
    assert bert.config._attn_implementation == "eager"
    with pytest.raises(InputError):  # an empty layer range, before the forward
        streaming_rollout(_handle(bert), _text_batch(), start_layer=3)


def test_a_plain_forward_crossing_the_switch_still_gets_eager_attentions(bert):
    """Another thread running the same model while a capture has switched its config."""
    inputs = _text_batch()
    with torch.no_grad():
        expected = bert(**inputs, output_attentions=True)
        with streaming_implementation(bert):
            crossed = bert(**inputs, output_attentions=True)
    for a, b in zip(expected.attentions, crossed.attentions):
        torch.testing.assert_close(b, a, atol=ATOL, rtol=0)
    torch.testing.assert_close(crossed.logits, expected.logits, atol=ATOL, rtol=0)


def test_concurrent_captures_agree_with_serial(bert, vit):
    text = _text_batch()
    image = {"pixel_values": torch.randn(1, 3, 32, 32)}
    serial = [streaming_rollout(_handle(bert), text).matrix, streaming_rollout(_handle(vit), image).matrix]
    results: dict[int, torch.Tensor] = {}

    def run(index, model, inputs):
        for _ in range(3):
            results[index] = streaming_rollout(_handle(model), inputs).matrix

    threads = [threading.Thread(target=run, args=(0, bert, text)), threading.Thread(target=run, args=(1, vit, image))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    torch.testing.assert_close(results[0], serial[0], atol=0, rtol=0)
    torch.testing.assert_close(results[1], serial[1], atol=0, rtol=0)


def test_blocked_probabilities_match_one_block(bert, monkeypatch):
    """Force tiny query blocks: the result must not depend on the block size."""
    from rollout_core.lowmem import attention

    inputs = _text_batch()
    whole = streaming_rollout(_handle(bert), inputs).matrix
    monkeypatch.setattr(attention, "query_block", lambda batch, heads, n: 3)
    blocked = streaming_rollout(_handle(bert), inputs).matrix
    torch.testing.assert_close(blocked, whole, atol=1e-6, rtol=0)



@pytest.mark.parametrize("name", ["bert", "deberta"])  # attention interface / forward hooks
def test_model_errors_are_wrapped_and_the_capture_is_undone(name, request):
    """The streaming forward wraps a model's own failure like capture.run, and restores the model after it."""
    model = request.getfixturevalue(name)
    implementation = model.config._attn_implementation
    hooks = [len(m._forward_hooks) for m in model.modules()]
    hook = model.get_input_embeddings().register_forward_hook(_broken)
    try:
        with pytest.raises(UnsupportedModelError, match=r"^the model failed on this input: boom$"):
            streaming_rollout(_handle(model), _text_batch())
    finally:
        hook.remove()
    assert model.config._attn_implementation == implementation
    assert [len(m._forward_hooks) for m in model.modules()] == hooks


def _broken(module, args, output):
    raise RuntimeError("boom")

def test_encoder_decoder_is_refused_clearly():
    config = transformers.T5Config(vocab_size=40, d_model=32, d_kv=8, d_ff=64, num_layers=1, num_heads=4)
    model = transformers.T5ForConditionalGeneration(config).eval()
    with pytest.raises(UnsupportedModelError, match="encoder-decoder"):
        streaming_rollout(_handle(model), {"input_ids": torch.tensor([[1, 2, 3]])})


def test_estimate_and_budget(monkeypatch):
    # 24 layers x 16 heads x 4096² fp32: the 25 GB of the issue
    assert estimate_full_capture_bytes(24, 16, 4096, 1, torch.float32) == 24 * 16 * 4096 * 4096 * 4
    assert estimate_full_capture_bytes(2, 3, 5, 2, torch.float16) == 2 * 3 * 25 * 2 * 2
    monkeypatch.setenv("ROLLOUT_MEMORY_BUDGET_MB", "512")
    assert memory_budget_bytes() == 512 * 2**20
    monkeypatch.delenv("ROLLOUT_MEMORY_BUDGET_MB")
    assert memory_budget_bytes() > 0


def _family_kinds() -> list[str]:
    # seq2seq is refused (tested above); vit-wide needs interpolated positions, a plain-path matter
    return [kind for kind in TEXT_FAMILIES + IMAGE_FAMILIES if kind not in ("t5", "bart", "vit-wide")]


@pytest.mark.parametrize("kind", _family_kinds())
def test_every_self_attention_family_keeps_sdpa_and_matches_plain_path(kind, tmp_path):
    """The integration engineer's tiny models, loaded by load_model: batch of 2, padded for text."""
    import numpy as np

    from rollout_core.models.loading import load_model

    handle = load_model(str(build_tiny(kind, tmp_path / kind)))
    if handle.modality == "text":
        tokenizer = handle.processor
        if tokenizer.pad_token is None:
            tokenizer.pad_token = tokenizer.eos_token or tokenizer.unk_token
        inputs = dict(tokenizer(["the movie was not very good", "bad"], return_tensors="pt", padding=True))
    else:
        images = list(np.random.default_rng(0).integers(0, 255, (2, 40, 40, 3), dtype=np.uint8))
        inputs = dict(handle.processor(images=images, return_tensors="pt"))
    _same_as_plain(handle.model, inputs, path="interface", sdpa_layers=handle.num_layers, rows=[0])


@pytest.mark.parametrize("model_class, config_class, config, path, sdpa_layers", [
    # one layer module shared by all 3 layers: layers are counted per call
    ("AlbertModel", "AlbertConfig", dict(embedding_size=16, num_hidden_layers=3), "interface", 3),
    # logit soft-capping (SDPA cannot): the output comes from the same probability blocks; sliding window
    ("Gemma2ForCausalLM", "Gemma2Config",
     dict(num_hidden_layers=2, num_key_value_heads=2, head_dim=8, attn_logit_softcapping=1.0, sliding_window=4,
          query_pre_attn_scalar=1),
     "interface", 0),
    # attention computed inline (no interface): hooks
    ("MPNetModel", "MPNetConfig", dict(num_hidden_layers=2), "hooks", 0),
])
def test_shared_layers_softcap_and_inline_families(model_class, config_class, config, path, sdpa_layers):
    model = _tiny(model_class, config_class, 5, **TEXT, **config)
    with torch.no_grad():  # sharper attention (scores of several units): soft-capping and masks matter
        for name, param in model.named_parameters():
            if name.rsplit(".", 2)[-2] in ("q_proj", "k_proj", "query", "key", "q", "k"):
                param.mul_(6.0)
    _same_as_plain(model, _text_batch(), path=path, sdpa_layers=sdpa_layers, rows=[0], logits_atol=1e-4)


def test_rows_outside_the_input_are_a_clear_error(bert):
    with pytest.raises(InputError, match="outside"):
        streaming_rollout(_handle(bert), _text_batch(), rows=[8])
    assert bert.config._attn_implementation == "eager"
