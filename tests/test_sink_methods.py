"""Sinks end to end: a tiny BERT whose weights make [SEP] a sink in layer 1 is explained; the explanation records
the sink, the summary names it with its share (computed here from the layer's attention), and the sink_free
method equals a naive loop that drops the recorded sink columns."""
from __future__ import annotations

import copy
import dataclasses

import numpy as np
import pytest
import torch
from test_sinks import _naive_sink_free

from rollout_core.explain import explain_text
from rollout_core.summary import summarize

TEXT = "the cat sat on the mat"
DIMS = [0, 16]  # one dimension in each of the two heads (hidden 32, head size 16)


@pytest.fixture(scope="module")
def planted(tiny_handle):
    """The tiny BERT with [SEP]'s embedding alone along DIMS, layer 1's queries a constant along DIMS and keys the
    inputs (every query attends to [SEP]), and layer 1's values blind to DIMS ([SEP] passes little)."""
    base = tiny_handle("bert")
    model = copy.deepcopy(base.model)
    sep = base.processor.sep_token_id
    with torch.no_grad():
        emb = model.bert.embeddings
        for table in (emb.word_embeddings, emb.position_embeddings, emb.token_type_embeddings):
            table.weight[:, DIMS] = 0.0
        emb.word_embeddings.weight[sep] = 0.0
        emb.word_embeddings.weight[sep, DIMS] = 10.0
        attn = model.bert.encoder.layer[0].attention.self
        attn.query.weight.zero_()
        attn.query.bias.zero_()
        attn.query.bias[DIMS] = 20.0
        attn.key.weight.copy_(torch.eye(32))
        attn.key.bias.zero_()
        keep = torch.ones(32)
        keep[DIMS] = 0.0
        attn.value.weight.copy_(torch.diag(keep))
        attn.value.bias.zero_()
    return dataclasses.replace(base, model=model)


def test_planted_sink_is_recorded_and_named_in_the_summary(planted):
    e = explain_text(planted, TEXT, method="rollout")
    sep = e.tokens.index("[SEP]")
    assert e.extras["sinks"]["positions"][0] == [sep]
    fused = e.layer_attention[0]  # head-fused attention of layer 1, real rows only (no padding here)
    share = fused[:, sep].sum() / fused.sum()
    assert share > 0.9
    assert f"1 sink token ('[SEP]') took {100 * share:.0f}% of layer 1's attention." in summarize(e)
    assert "Sink-free" not in summarize(e)
    assert e.to_dict()["extras"]["sinks"]["positions"][0] == [sep]  # kept in saved explanations


def test_sink_free_method_equals_the_naive_loop(planted):
    plain = explain_text(planted, TEXT, method="rollout")
    e = explain_text(planted, TEXT, method="sink_free", keep_heads=True)
    n = len(e.tokens)
    sinks = np.zeros((e.num_layers, 1, n), dtype=bool)
    for layer, positions in enumerate(plain.extras["sinks"]["positions"]):
        sinks[layer, 0, positions] = True
    assert sinks[0, 0].sum() == 1
    expected = _naive_sink_free(e.head_attention[:, None], sinks)[0, 0]
    np.testing.assert_allclose(e.scores, expected, atol=1e-6)
    assert np.abs(e.scores - plain.scores).max() > 0.05  # dropping the sink changed the map
    assert "Sink-free rollout drops the attention paid to them" in summarize(e)


def test_no_sink_no_sentence(tiny_handle):
    e = explain_text(tiny_handle("bert"), TEXT, method="rollout")
    assert not any(e.extras["sinks"]["positions"])
    assert "sink" not in summarize(e).lower()


def test_overlay_marks_sink_patches_at_their_centres():
    from test_figures import _image_expl

    from rollout_core import figures

    expl = _image_expl(np.full((2, 4), 1 / 8))  # 2 x 4 patches of 10 x 10 pixels, positions 1..8
    assert [t.name for t in figures.image_overlay(expl).data if t.name == "attention sink"] == []
    expl.extras["sinks"] = {"positions": [[0, 4], [4, 6]], "share": [0.3, 0.2]}  # [CLS] is not a patch
    marks = [t for t in figures.image_overlay(expl).data if t.name == "attention sink"]
    assert len(marks) == 1
    # position 4 = patch 3 = row 0, col 3; position 6 = row 1, col 1; centres as the heatmap draws them
    # (x0 = dx/2 - 0.5)
    np.testing.assert_allclose(marks[0].x, [34.5, 14.5])
    np.testing.assert_allclose(marks[0].y, [4.5, 14.5])
    assert marks[0].hovertext[0].endswith("(patch row 0, col 3) in layer 1, 2")
