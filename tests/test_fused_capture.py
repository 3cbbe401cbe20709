"""Heads fused inside the forward pass (capture.fused_heads, issue 29): the attention-only methods give the same
Explanation as with every layer's per-head attention kept; the per-head tensors do not come back; other threads'
forward passes of the same model are untouched. The reference is the per-head path of the same code (the fusion
switched off), whose maths tests/test_explain.py checks against direct forward passes."""
from __future__ import annotations

import threading

import numpy as np
import pytest
import torch

from rollout_core import capture, methods
from rollout_core.explain import explain_image, explain_texts
from rollout_core.pipeline import batch
from tiny_models import IMAGE_FAMILIES, TEXT_FAMILIES

FUSED = tuple(s.name for s in methods.all_methods() if s.fused_heads_suffice)
TEXTS = ["the movie was great fun", "a boring plot but i loved the acting and the music very much"]
FIELDS = ("scores", "layer_scores", "layer_attention_scores", "matrix", "layer_attention")
SEQ2SEQ = {"t5", "bart"}


def _picture() -> np.ndarray:
    return (np.random.default_rng(1).random((40, 56, 3)) * 255).astype(np.uint8)


def _same(fused, per_head) -> None:
    for a, b in zip(fused, per_head):
        for field in FIELDS:
            x, y = getattr(a, field), getattr(b, field)
            assert (x is None) == (y is None), field
            if x is not None:
                np.testing.assert_allclose(x, y, rtol=0, atol=1e-6, err_msg=field)
        assert a.extras.get("sinks") == b.extras.get("sinks")


def _both(monkeypatch, run):
    fused = run()
    monkeypatch.setattr(batch, "_fuse_in_forward", lambda method, opts: False)
    per_head = run()
    monkeypatch.undo()
    return fused, per_head


@pytest.mark.parametrize("kind", [k for k in TEXT_FAMILIES if k not in SEQ2SEQ])
@pytest.mark.parametrize("method", FUSED)
def test_text_families_fused_equals_per_head(tiny_handle, monkeypatch, kind, method):
    handle = tiny_handle(kind)
    fusion = "max" if kind in ("bert", "gpt2") else "mean"
    fused, per_head = _both(monkeypatch, lambda: explain_texts(handle, TEXTS, method=method, head_fusion=fusion))
    _same(fused, per_head)  # two texts of different lengths: a padded batch


@pytest.mark.parametrize("kind", IMAGE_FAMILIES)
@pytest.mark.parametrize("method", FUSED)
def test_image_families_fused_equals_per_head(tiny_handle, monkeypatch, kind, method):
    handle = tiny_handle(kind)
    fused, per_head = _both(monkeypatch, lambda: [explain_image(handle, _picture(), method=method,
                                                                head_fusion="min", discard_ratio=0.3)])
    _same(fused, per_head)


def test_the_capture_returns_fused_heads_and_keeps_no_per_head_tensor(tiny_handle):
    handle = tiny_handle("bert")
    inputs = dict(handle.processor(TEXTS[:1], return_tensors="pt"))
    plain = capture.run(handle.model, inputs, num_layers=handle.num_layers)
    fused = capture.run(handle.model, inputs, num_layers=handle.num_layers, head_fusion="mean")
    assert {tuple(a.shape[:2]) for a in plain.attentions} == {(1, handle.num_heads)}
    assert {tuple(a.shape[:2]) for a in fused.attentions} == {(1, 1)}
    assert fused.outputs.attentions == fused.attentions  # the model output holds no per-head copy either
    for p, f in zip(plain.attentions, fused.attentions):
        torch.testing.assert_close(f[:, 0], p.mean(1), rtol=0, atol=0)
    torch.testing.assert_close(fused.logits, plain.logits, rtol=0, atol=0)  # the forward pass itself unchanged


def test_other_threads_see_per_head_attention(tiny_handle):
    """The fusion is on for the calling thread only (sessions of the dashboard share one model)."""
    handle = tiny_handle("bert")
    inputs = dict(handle.processor(TEXTS[:1], return_tensors="pt"))
    seen = {}

    def other() -> None:
        seen["heads"] = capture.run(handle.model, inputs, num_layers=handle.num_layers).attentions[0].shape[1]

    with capture.fused_heads(handle.model, "mean"):
        thread = threading.Thread(target=other)
        thread.start()
        thread.join()
        with torch.no_grad():
            mine = handle.model(**inputs, output_attentions=True).attentions[0].shape[1]
    assert (seen["heads"], mine) == (handle.num_heads, 1)


@pytest.mark.parametrize("kind", ["bert", "distilbert", "roberta", "gpt2", "llama", "vit", "deit", "dinov2", "beit"])
def test_families_whose_attention_modules_transformers_names_are_fused(tiny_handle, kind):
    assert capture.attention_outputs(tiny_handle(kind).model)


def test_keep_heads_and_gradients_keep_every_head(tiny_handle, monkeypatch):
    seen = []
    real_run = capture.run

    def spy(*args, **kwargs):
        seen.append(kwargs.get("head_fusion"))
        return real_run(*args, **kwargs)

    monkeypatch.setattr(capture, "run", spy)
    handle = tiny_handle("bert")
    explain_texts(handle, TEXTS[:1], method="rollout")
    explain_texts(handle, TEXTS[:1], method="rollout", keep_heads=True)
    explain_texts(handle, TEXTS[:1], method="gradient")
    explain_texts(handle, TEXTS[:1], method="alti")
    assert seen == ["mean", None, None, None]


@pytest.mark.parametrize("method", ["gradient", "attnlrp", "rollout"])
def test_the_attention_check_warns_about_nothing(tiny_handle, method):
    """The finiteness check reads one number from attentions that may carry gradients (gradient rollout, AttnLRP):
    no autograd warning reaches the user's console."""
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        explain_texts(tiny_handle("bert"), TEXTS[:1], method=method)
