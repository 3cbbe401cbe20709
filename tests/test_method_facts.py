"""What a method knows about itself: where it can run (decided once, before any forward pass, and matching what
actually runs), its display order, facts line, summary note, int8 eligibility and the method table."""
from __future__ import annotations

import json

import numpy as np
import pytest

from rollout_core import methods
from rollout_core.errors import RolloutError
from rollout_core.models import measured

TEXT = "the cat sat"


def test_display_order_is_the_order_tuple_then_the_rest_by_name():
    listed = [n for n in methods.ORDER if n in methods.names()]
    assert list(methods.names()[:len(listed)]) == listed
    rest = methods.names()[len(listed):]
    assert list(rest) == sorted(rest) and not set(rest) & set(methods.ORDER)
    assert len(set(methods.ORDER)) == len(methods.ORDER)


def _explain(handle, name: str, **kwargs):
    from rollout_core.explain import explain_image, explain_text

    if handle.modality == "text":
        return explain_text(handle, TEXT, method=name, **kwargs)
    from PIL import Image

    return explain_image(handle, Image.new("RGB", (32, 32), (200, 30, 30)), method=name, **kwargs)


@pytest.mark.parametrize("kind", ["bert", "bert-encoder", "sentence", "gpt2", "t5", "vit", "dinov2"])
def test_offered_means_it_runs_and_refused_means_it_fails_before_the_forward_pass(tiny_handle, kind, monkeypatch):
    """On each kind of model: every method `runnable` offers explains the input; every other one is refused with
    its reason (and the methods that can run) before the model runs."""
    handle = tiny_handle(kind)
    offered = [s.name for s in methods.runnable(handle)]
    assert offered and offered[0] == "rollout"
    for name in offered:
        scores = np.asarray(_explain(handle, name).scores)
        assert np.isfinite(scores).all(), name
    from rollout_core import capture

    def no_forward(*args, **kwargs):
        raise AssertionError("the model ran before the refusal")

    monkeypatch.setattr(capture, "forward", no_forward)
    for spec in methods.all_methods():
        if spec.name in offered:
            continue
        reason = str(spec.refusal(handle))
        with pytest.raises(RolloutError) as raised:
            _explain(handle, spec.name)
        assert str(raised.value).startswith(reason) and f"choose one of: {', '.join(offered)}" in str(raised.value)


def test_what_each_kind_of_model_is_offered(tiny_handle):
    def offered(kind, **kwargs):
        return {s.name for s in methods.runnable(tiny_handle(kind), **kwargs)}

    gradient_based = {s.name for s in methods.all_methods() if s.needs_gradients or s.needs_classes}
    assert gradient_based <= offered("bert")  # a classifier runs them all
    assert not gradient_based & offered("bert-encoder")  # no head: nothing to differentiate
    assert "gradient" not in offered("sentence") and "gradient" in offered("sentence", zero_shot=True)
    assert "knockout_shapley" not in offered("vit") and "knockout_shapley" not in offered("gpt2")
    assert {"alti", "norm", "value_zeroing", "attnlrp"}.isdisjoint(offered("gpt2"))  # layers it cannot read
    assert offered("t5") == {s.name for s in methods.all_methods() if s.seq2seq}
    assert offered("bert", capture="lowmem") == {s.name for s in methods.all_methods() if s.can_stream}
    assert "alti_tuned" not in offered("bert")  # no record of fine-tuned blocks


def test_the_measured_default_falls_back_when_it_cannot_run(tiny_handle, monkeypatch):
    from rollout_core.explain import explain_text

    handle = tiny_handle("sentence")
    monkeypatch.setattr(measured, "figures", lambda name: {"methods": {}} if name == handle.name else None)
    monkeypatch.setattr(measured, "default_method", lambda name, registered: "gradient")
    e = explain_text(handle, TEXT)
    assert e.method == measured.FALLBACK and "cannot run" in e.settings["method_default"]
    assert explain_text(handle, TEXT, labels=["good", "bad"]).method == "gradient"  # zero-shot labels: a score


def test_facts_line_display_name_and_summary_note(tiny_handle):
    from rollout_core.explain import explain_image, explain_text
    from rollout_core.summary import summarize

    flow = explain_text(tiny_handle("bert"), TEXT, method="flow")
    assert methods.describe("flow", flow.settings).startswith("attention flow: exact; explained row only")
    from PIL import Image

    image = explain_image(tiny_handle("vit"), Image.new("RGB", (32, 32)), method="flow")
    assert "approximate" in methods.describe("flow", image.settings) or "exact here" in \
        methods.describe("flow", image.settings)
    assert methods.describe("rollout", flow.settings) == "" and methods.describe("bogus", flow.settings) == ""
    assert methods.display_name("alti_tuned") == "ALTI rollout (fine-tuned blocks)"
    assert methods.display_name("an_old_method") == "an_old_method"
    e = explain_text(tiny_handle("bert"), TEXT, method="sink_free")
    e.extras["sinks"] = {"positions": [[0], []], "share": [0.6, 0.0]}
    note = methods.get("sink_free").summary_note
    assert note and note in summarize(e)
    e.method = "rollout"
    assert note not in summarize(e)


def test_int8_corpus_takes_exactly_the_attention_only_methods():
    from rollout_core.corpus.engine import check_precision
    from rollout_core.errors import InputError

    for spec in methods.all_methods():
        if spec.attention_only:
            check_precision("int8", spec.name)
            assert not spec.needs_gradients and spec.recorder is None or spec.name == "sink_free"
        else:
            with pytest.raises(InputError, match="precision int8 works with the methods rollout, flow"):
                check_precision("int8", spec.name)


def test_signed_and_whole_model_facts():
    signed = {s.name for s in methods.all_methods() if s.signed}
    assert {"attnlrp", "knockout_shapley"} <= signed and "rollout" not in signed and "gradient" not in signed
    assert {s.name for s in methods.all_methods() if s.whole_model} == \
        {s.name for s in methods.all_methods() if not s.layered}


def test_method_table_holds_every_method_and_the_recorded_figures():
    rows = methods.table()
    assert [r["name"] for r in rows] == list(methods.names())
    for model in ("default-text", "default-image"):
        recorded = json.loads(measured.path_for(model).read_text())["methods"]  # read here, not through the code
        for r in rows:
            got = r["measured"][model]
            if r["name"] in recorded:
                assert got == {"pointing_game": recorded[r["name"]]["pointing_game"],
                               "deletion_auc": recorded[r["name"]]["deletion_auc"]}
            else:
                assert got is None
    for r in rows:
        spec = methods.get(r["name"])
        assert r["title"] == spec.title and r["explains"] == spec.explains and r["modalities"] == spec.modalities
        assert r["class_specific"] == spec.class_specific and r["explains"]
    text = methods.table_markdown()
    assert text.count("\n") == len(rows) + 2 and all(f"| {r['title']} | `{r['name']}` |" in text for r in rows)
    alti = next(line for line in text.splitlines() if "`alti`" in line)
    assert f"{recorded['alti']['pointing_game']:.2f} / {recorded['alti']['deletion_auc']:.2f}" in alti
