"""The contribution methods (norm, alti, value_zeroing) end to end through explain_text / explain_image against
independent loops over the model's own weights, padding, unsupported families and the CLI."""
from __future__ import annotations

import contextlib
import dataclasses
import json

import numpy as np
import pytest
import torch
from cli_driver import assert_one_error_line, run_cli_cases
from test_value_zeroing import _reference, _sharpened

from rollout_core import capture, methods
from rollout_core.errors import UnsupportedModelError
from rollout_core.explain import explain_image, explain_text, explain_texts
from rollout_core.options import Options

TEXT = "the movie was very good"
NEW = ("norm", "alti", "value_zeroing")


@pytest.fixture(autouse=True)
def _no_grad():
    """The references below read weights directly: no autograd graph."""
    with torch.no_grad():
        yield


def _forward(model, inputs):
    with torch.no_grad():
        out = model(**inputs, output_attentions=True, output_hidden_states=True)
    return [h[0].double() for h in out.hidden_states], [a[0].double() for a in out.attentions]


def _heads(attention, x):
    """f^h(x_j) = W_O^h (W_V^h x_j + b_V^h) by an explicit loop: (H, n, d). attention: the layer's attention."""
    value, output = attention.self.value, attention.output.dense
    heads = attention.self.num_attention_heads if hasattr(attention.self, "num_attention_heads") else 2
    dh = value.weight.shape[0] // heads
    w_v, b_v, w_o = value.weight.double(), value.bias.double(), output.weight.double()
    out = torch.zeros(heads, x.shape[0], w_o.shape[0], dtype=torch.float64)
    for h in range(heads):
        rows = slice(h * dh, (h + 1) * dh)
        for j in range(x.shape[0]):
            out[h, j] = w_o[:, rows] @ (w_v[rows] @ x[j] + b_v[rows])
    return out


def _rollout(layers, residual):
    product = torch.eye(layers[0].shape[0], dtype=torch.float64)
    for c in layers:
        c = c + residual * torch.eye(c.shape[0], dtype=torch.float64)
        product = (c / c.sum(-1, keepdim=True)) @ product
    return product


def _bert_layers(handle):
    return handle.model.bert.encoder.layer


def _check(e, per_layer, residual):
    """Final scores = [CLS] row of the rollout; the slider's per-layer view = each layer's own matrix."""
    np.testing.assert_allclose(e.scores, _rollout(per_layer, residual)[0].numpy(), atol=2e-5)
    for l, c in enumerate(per_layer):
        np.testing.assert_allclose(e.layer_attention[l], c.numpy(), atol=2e-5)
        np.testing.assert_allclose(e.layer_attention_scores[l], c[0].numpy(), atol=2e-5)


def test_norm_rollout_equals_a_per_head_loop(tiny_handle):
    handle = tiny_handle("bert")
    hidden, atts = _forward(handle.model, dict(handle.processor([TEXT], return_tensors="pt")))
    per_layer = []
    for l, block in enumerate(_bert_layers(handle)):
        f, n = _heads(block.attention, hidden[l]), hidden[l].shape[0]
        norms = torch.tensor([[torch.einsum("h,hd->d", atts[l][:, i, j], f[:, j]).norm() for j in range(n)]
                              for i in range(n)], dtype=torch.float64)
        per_layer.append(norms / norms.sum(-1, keepdim=True))
    e = explain_text(handle, TEXT, method="norm", residual_weight=0.5)
    _check(e, per_layer, residual=0.5)


def test_norm_rollout_on_a_pre_ln_image_model(tiny_handle):
    """ViT (pre-LN): f acts on LN_before(x); the [CLS] row of the norm rollout."""
    handle = tiny_handle("vit")
    image = (np.random.default_rng(0).random((32, 32, 3)) * 255).astype(np.uint8)
    e = explain_image(handle, image, method="norm")
    pixels = handle.processor(images=image, return_tensors="pt")["pixel_values"]
    hidden, atts = _forward(handle.model, {"pixel_values": pixels})
    per_layer = []
    for l, block in enumerate(handle.model.vit.layers):
        x = torch.nn.functional.layer_norm(hidden[l], (hidden[l].shape[-1],), block.layernorm_before.weight.double(),
                                           block.layernorm_before.bias.double(), block.layernorm_before.eps)
        w_v, b_v, w_o = (block.attention.v_proj.weight.double(), block.attention.v_proj.bias.double(),
                         block.attention.o_proj.weight.double())
        mixed = torch.einsum("hij,jhe,dhe->ijd", atts[l], (x @ w_v.T + b_v).view(x.shape[0], 2, -1),
                             w_o.view(w_o.shape[0], 2, -1))
        norms = mixed.norm(dim=-1)
        per_layer.append(norms / norms.sum(-1, keepdim=True))
    _check(e, per_layer, residual=1.0)


def _alti_layer(block, x, a):
    """ALTI of one post-LN BERT layer by explicit loops: T_i(x_j) = LN-linearised (sum_h a^h_ij f^h(x_j) + [i=j] x_j),
    y_i = LN(x_i + attention output_i) computed directly, c_ij = max(0, |y_i|_1 - |y_i - T_i(x_j)|_1)."""
    f, n = _heads(block.attention, x), x.shape[0]
    ln = block.attention.output.LayerNorm
    gamma, beta, b_o = ln.weight.double(), ln.bias.double(), block.attention.output.dense.bias.double()
    c = torch.zeros(n, n, dtype=torch.float64)
    for i in range(n):
        z = [torch.einsum("h,hd->d", a[:, i, j], f[:, j]) + (x[j] if i == j else 0) for j in range(n)]
        pre = sum(z) + b_o
        std = (pre.var(unbiased=False) + ln.eps).sqrt()
        y = gamma * (pre - pre.mean()) / std + beta
        for j in range(n):
            t = gamma * (z[j] - z[j].mean()) / std
            c[i, j] = max(0.0, float(y.abs().sum() - (y - t).abs().sum()))
    return c / c.sum(-1, keepdim=True)


def test_alti_rollout_equals_explicit_loops(tiny_handle):
    handle = tiny_handle("bert")
    hidden, atts = _forward(handle.model, dict(handle.processor([TEXT], return_tensors="pt")))
    per_layer = [_alti_layer(block, hidden[l], atts[l]) for l, block in enumerate(_bert_layers(handle))]
    e = explain_text(handle, TEXT, method="alti", residual_weight=2.0)  # ALTI has its residual: the option is unused
    _check(e, per_layer, residual=0.0)


def test_value_zeroing_rollout_equals_rerunning_with_v_j_zeroed(tiny_handle):
    base = tiny_handle("bert")
    handle = dataclasses.replace(base, model=_sharpened(base.model))  # float64, values that matter (see there)
    inputs = dict(handle.processor([TEXT], return_tensors="pt"))
    n = inputs["input_ids"].shape[1]
    per_layer = []
    for l in range(handle.num_layers):
        raw = torch.stack([_reference(handle.model, inputs, l, j)[0] for j in range(n)], dim=-1)
        per_layer.append(raw / raw.sum(-1, keepdim=True))
    e = explain_text(handle, TEXT, method="value_zeroing")
    _check(e, per_layer, residual=0.0)


def _method_output(handle, name, inputs):
    """One registered method run on a padded batch through capture.run and methods.compute, as explain does."""
    spec = methods.get(name)
    mask = inputs["attention_mask"]
    opts = Options(method=name, head_fusion="mean", residual_weight=1.0, discard_ratio=0.0, start_layer=0,
                   end_layer=handle.num_layers, keep_heads=False, capture="full")
    weights = torch.zeros(mask.shape)
    weights[:, 0] = 1.0
    with (spec.recorder(handle.model) if spec.recorder else contextlib.nullcontext()) as recorded:
        captured = capture.run(handle.model, inputs, num_layers=handle.num_layers,
                               hidden_states=spec.needs_hidden_states)
    return methods.compute(spec, methods.MethodInput(handle, inputs, captured, opts, mask, weights, True, recorded))


@pytest.mark.parametrize("name", NEW + ("sink_free",))
def test_padding_gets_exactly_zero_and_batches_equal_single_texts(tiny_handle, name):
    handle = tiny_handle("bert")
    texts = ["the movie was very good and fun", "bad plot"]
    inputs = dict(handle.processor(texts, return_tensors="pt", padding=True))
    short = int(inputs["attention_mask"][1].sum())
    out = _method_output(handle, name, inputs)
    assert short < inputs["input_ids"].shape[1]
    assert (out.layer_rows[:, 1, short:] == 0).all()
    matrix = out.final_matrix(inputs["attention_mask"])
    assert (matrix[1, short:] == 0).all() and (matrix[1, :, short:] == 0).all()
    if out.layer_maps is not None:
        assert (out.layer_maps[:, 1, short:] == 0).all() and (out.layer_maps[:, 1, :, short:] == 0).all()
    for batched, text in zip(explain_texts(handle, texts, method=name), texts):
        alone = explain_text(handle, text, method=name)
        np.testing.assert_allclose(batched.scores, alone.scores, atol=1e-5)
        np.testing.assert_allclose(batched.layer_attention_scores, alone.layer_attention_scores, atol=1e-5)


@pytest.mark.parametrize("name", NEW)
def test_unsupported_family_names_the_supported_ones(tiny_handle, name):
    with pytest.raises(UnsupportedModelError, match="bert, roberta.*vit.*this model is 'gpt2'"):
        explain_text(tiny_handle("gpt2"), "the cat sat", method=name)


def test_specs_say_what_the_options_do():
    for name in NEW:
        spec = methods.get(name)
        assert not spec.uses_head_fusion and spec.cumulative and not spec.can_stream and not spec.seq2seq
        assert spec.layer_view != "raw attention"
    assert methods.get("norm").uses_residual and not methods.get("alti").uses_residual
    assert not methods.get("value_zeroing").uses_residual and methods.get("value_zeroing").needs_hidden_states
    sink = methods.get("sink_free")
    assert sink.uses_head_fusion and sink.uses_residual and sink.layer_view == "raw attention"


@pytest.mark.slow
def test_cli_runs_each_new_method(tiny_model_dir, tmp_path):
    bert, gpt2 = tiny_model_dir("bert"), tiny_model_dir("gpt2")
    cases = [(["text", "--model", str(bert), "--text", "the cat sat", "--method", m, "--json"], None)
             for m in NEW + ("sink_free",)]
    cases.append((["text", "--model", str(gpt2), "--text", "the cat sat", "--method", "alti"], None))
    results = run_cli_cases(cases, tmp_path, warm=[bert, gpt2])
    for (argv, _), result in zip(cases[:-1], results[:-1]):
        assert result.status == 0, result.stderr[-2000:]
        data = json.loads(result.stdout)
        assert data["settings"]["method"] == argv[argv.index("--method") + 1]
        assert len(data["scores"]) == len(data["tokens"]) and np.isclose(sum(data["display_scores"]), 1.0)
    assert_one_error_line(results[-1], "gpt2", "bert")
