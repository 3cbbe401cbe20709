"""The final matrix of the rolled-out methods is deferred (issue 29): explain computes the explained rows by
vector-matrix products and leaves the n x n product to the first read of `Explanation.matrix`. Checked: the rows and
the deferred matrix equal the eager product (`attention_rollout` over the very attentions the explanation came
from) on every tiny family and on padded batches; the default path never computes the product; reading it computes
it once, also from many threads at once; pickling and the result cache's accounting work before and after."""
from __future__ import annotations

import pickle
import threading

import numpy as np
import pytest

from rollout_core import methods
from rollout_core.explain import explain_image, explain_text, explain_texts
from rollout_core.explanation_data import Deferred
from rollout_core.lru import size_of
from rollout_core.maths.rollout import attention_rollout
from tiny_models import IMAGE_FAMILIES, TEXT_FAMILIES

TEXTS = ["the movie was great fun", "a boring plot but i loved the acting and the music very much"]
SEQ2SEQ = {"t5", "bart"}


def _picture() -> np.ndarray:
    return (np.random.default_rng(2).random((40, 56, 3)) * 255).astype(np.uint8)


@pytest.fixture
def method_inputs(monkeypatch):
    """Every MethodInput explain hands to a method, kept for the eager reference."""
    seen = []
    compute = methods.compute

    def keep(spec, method_input):
        seen.append(method_input)
        return compute(spec, method_input)

    monkeypatch.setattr(methods, "compute", keep)
    return seen


@pytest.fixture
def products(monkeypatch):
    """How many deferred final matrices were computed."""
    calls = []
    matrix = methods.RolledOut.matrix

    def counted(self, *args):
        calls.append(args)
        return matrix(self, *args)

    monkeypatch.setattr(methods.RolledOut, "matrix", counted)
    return calls


def _check_against_eager(explanations, method_input, **options):
    """Each explanation's layer rows and (deferred) matrix against the eager product of its batch's attentions.
    With discarding the product is not deferred (the ranks would be rebuilt from the renormalised view only to
    rounding) and equals the eager one."""
    eager = attention_rollout(method_input.captured.attentions, attention_mask=method_input.mask, all_layers=True,
                              **options).double()
    rows = (method_input.weights.double()[None, :, None, :] @ eager).squeeze(-2)
    for b, e in enumerate(explanations):
        n = len(e.tokens)
        assert isinstance(e.__dict__["matrix"], Deferred) == (options.get("discard_ratio", 0) == 0)
        np.testing.assert_allclose(e.layer_scores, rows[:, b, :n].numpy(), rtol=0, atol=2e-6)
        np.testing.assert_allclose(e.matrix, eager[-1, b, :n, :n].numpy(), rtol=0, atol=2e-6)
        assert isinstance(e.__dict__["matrix"], np.ndarray) and e.matrix.dtype == np.float64


@pytest.mark.parametrize("kind", [k for k in TEXT_FAMILIES if k not in SEQ2SEQ])
def test_text_families_padded_batch_equal_the_eager_product(tiny_handle, method_inputs, kind):
    options = dict(head_fusion="max" if kind in ("bert", "gpt2") else "mean", residual_weight=0.5)
    explanations = explain_texts(tiny_handle(kind), TEXTS, method="rollout", **options)
    (method_input,) = method_inputs
    assert method_input.mask is not None and not bool(method_input.mask.bool().all())  # a padded batch
    _check_against_eager(explanations, method_input, **options)


@pytest.mark.parametrize("discard", [0.0, 0.3])
@pytest.mark.parametrize("kind", IMAGE_FAMILIES)
def test_image_families_equal_the_eager_product_with_a_layer_range(tiny_handle, method_inputs, kind, discard):
    handle = tiny_handle(kind)
    options = dict(head_fusion="min", discard_ratio=discard, start_layer=1)
    e = explain_image(handle, _picture(), method="rollout", **options)
    _check_against_eager([e], method_inputs[0], **options)


def test_the_default_path_computes_no_product_and_a_read_computes_it_once(tiny_handle, products):
    e = explain_text(tiny_handle("bert"), TEXTS[1], method="rollout")
    e.display_scores(), e.to_dict(), e.to_json(), size_of(e), pickle.dumps(e)
    assert products == []
    first = e.matrix
    assert e.matrix is first and len(products) == 1


def test_threads_reading_at_once_compute_it_once(tiny_handle, products):
    e = explain_text(tiny_handle("bert"), TEXTS[1], method="rollout")
    start, got = threading.Barrier(8), []

    def read():
        start.wait()
        got.append(e.matrix)

    threads = [threading.Thread(target=read) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(products) == 1 and len(got) == 8 and all(m is got[0] for m in got)


def test_pickled_before_and_after_the_read_and_counted_at_its_full_size(tiny_handle):
    e = explain_text(tiny_handle("bert"), TEXTS[1], method="rollout")
    n = len(e.tokens)
    before = size_of(e)
    copy = pickle.loads(pickle.dumps(e))
    np.testing.assert_array_equal(copy.matrix, e.matrix)  # computed on each side, from the same maps
    assert size_of(e) == before  # the cache counted the n x n float64 matrix before it existed
    assert e.matrix.nbytes == n * n * 8
    np.testing.assert_array_equal(pickle.loads(pickle.dumps(e)).matrix, e.matrix)


@pytest.mark.parametrize("method", ["norm", "alti"])
def test_contribution_methods_defer_their_product_too(tiny_handle, products, method):
    """Their per-layer contributions (the slider's per-layer view) rolled out are the final matrix; the last
    layer's explained row of it is the final scores."""
    e = explain_text(tiny_handle("bert"), TEXTS[0], method=method)
    assert products == []
    position = int(np.flatnonzero(e.matrix.any(axis=1))[0])  # [CLS], the explained row
    np.testing.assert_allclose(e.matrix[position], e.scores, rtol=0, atol=1e-9)
