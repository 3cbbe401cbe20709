"""The explain path's hooks are put on a model once and act only inside their block on the calling thread (the value
norms of models.value_norms, the head fusion of capture.fused_heads): a forward pass outside a block, or on another
thread, records and changes nothing; explanations on threads sharing one model do not mix captures; a deep copy of
a model (the corpus's int8 copy) records its own forward passes, not the original's. References: the norms computed
by hand from the value projections' outputs, and explanations of the same texts made one at a time."""
from __future__ import annotations

import copy
import threading

import numpy as np
import torch

from rollout_core import capture
from rollout_core.explain import explain_text
from rollout_core.models.value_norms import record_value_norms, value_projections

TEXTS = ["the movie was great fun", "a boring plot but i loved the acting and the music very much", "the cat sat"]


def _inputs(handle, text):
    return dict(handle.processor([text], return_tensors="pt"))


def _norms_by_hand(handle, inputs, model=None):
    """Mean over heads of each token's value-vector norm, from a forward pass with hooks of the test's own."""
    model = handle.model if model is None else model
    outputs = []
    handles = [v.register_forward_hook(lambda m, a, out: outputs.append(out.detach())) for v in
               value_projections(model)]
    try:
        with torch.no_grad():
            model(**inputs)
    finally:
        for h in handles:
            h.remove()
    values = torch.stack(outputs)
    layers, batch, n, hidden = values.shape
    heads = handle.num_heads
    return values.view(layers, batch, n, heads, hidden // heads).norm(dim=-1).mean(-1)


def _hook_counts(model):
    return [len(m._forward_hooks) for m in model.modules()]


def test_hooks_are_installed_once_and_record_only_inside_the_block(tiny_handle):
    handle = tiny_handle("bert")
    short, long = _inputs(handle, TEXTS[2]), _inputs(handle, TEXTS[1])
    with record_value_norms(handle.model) as first, torch.no_grad():
        handle.model(**short)
    counts = _hook_counts(handle.model)
    with torch.no_grad():
        handle.model(**long)  # outside any block
    with record_value_norms(handle.model) as second, torch.no_grad():
        handle.model(**long)
    assert _hook_counts(handle.model) == counts  # nothing registered again
    torch.testing.assert_close(first.norms, _norms_by_hand(handle, short), rtol=0, atol=0)
    torch.testing.assert_close(second.norms, _norms_by_hand(handle, long), rtol=0, atol=0)


def test_nested_blocks_both_record(tiny_handle):
    handle = tiny_handle("bert")
    inputs = _inputs(handle, TEXTS[0])
    with record_value_norms(handle.model) as outer, record_value_norms(handle.model) as inner, torch.no_grad():
        handle.model(**inputs)
    expected = _norms_by_hand(handle, inputs)
    torch.testing.assert_close(outer.norms, expected, rtol=0, atol=0)
    torch.testing.assert_close(inner.norms, expected, rtol=0, atol=0)


def test_another_threads_forward_is_not_recorded(tiny_handle):
    handle = tiny_handle("bert")
    mine, theirs = _inputs(handle, TEXTS[2]), _inputs(handle, TEXTS[1])

    def other() -> None:
        with torch.no_grad():
            handle.model(**theirs)

    with record_value_norms(handle.model) as recorded, torch.no_grad():
        handle.model(**mine)
        thread = threading.Thread(target=other)
        thread.start()
        thread.join()
    torch.testing.assert_close(recorded.norms, _norms_by_hand(handle, mine), rtol=0, atol=0)


def test_a_deep_copy_records_its_own_forward_passes(tiny_handle):
    handle = tiny_handle("bert")
    inputs = _inputs(handle, TEXTS[0])
    with record_value_norms(handle.model), torch.no_grad():  # the original holds its hooks before the copy
        handle.model(**inputs)
    twin = copy.deepcopy(handle.model)
    with torch.no_grad():
        for p in twin.parameters():
            p.mul_(1.5)
    with record_value_norms(handle.model) as original, record_value_norms(twin) as copied, torch.no_grad():
        twin(**inputs)
    assert original.norms is None  # the copy's forward pass is not the original's
    torch.testing.assert_close(copied.norms, _norms_by_hand(handle, inputs, twin), rtol=0, atol=0)
    assert _hook_counts(twin) == _hook_counts(handle.model)  # the copied hooks serve the copy: none added


def test_fused_heads_are_inert_outside_their_block(tiny_handle):
    handle = tiny_handle("bert")
    inputs = _inputs(handle, TEXTS[0])
    capture.run(handle.model, inputs, num_layers=handle.num_layers, head_fusion="mean")  # hooks installed
    with torch.no_grad():
        attentions = handle.model(**inputs, output_attentions=True).attentions
    assert {a.shape[1] for a in attentions} == {handle.num_heads}


def test_explanations_on_threads_sharing_a_model_do_not_mix(tiny_handle):
    """Three texts of different lengths explained over and over on three threads at once give exactly what each
    gives alone (scores, per-layer rows, the sinks that read the value norms)."""
    handle = tiny_handle("bert")
    alone = {t: explain_text(handle, t, method="rollout") for t in TEXTS}
    start = threading.Barrier(len(TEXTS))
    found: dict[str, list] = {t: [] for t in TEXTS}
    errors: list[BaseException] = []

    def work(text: str) -> None:
        try:
            start.wait()
            for _ in range(15):
                found[text].append(explain_text(handle, text, method="rollout"))
        except BaseException as err:  # noqa: BLE001 - reported by the main thread
            errors.append(err)

    threads = [threading.Thread(target=work, args=(t,)) for t in TEXTS]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors
    for text, runs in found.items():
        for e in runs:
            np.testing.assert_array_equal(e.scores, alone[text].scores)
            np.testing.assert_array_equal(e.layer_scores, alone[text].layer_scores)
            assert e.extras["sinks"] == alone[text].extras["sinks"]
