"""`explain(model, input, options, **overrides)`, the one entry point, and `prepare` (encode once, check the cost,
then run): the same explanations as the wrappers, the modality from the model or the input, the budget's count of a
prepared request the same as from the raw input."""
from __future__ import annotations

import inspect
from typing import Any, Callable

import numpy as np
import pytest
from PIL import Image

import rollout_core as rc
from rollout_core import explain as explain_module
from rollout_core.errors import InputError
from rollout_core.explain import explain, explain_image, explain_text, explain_texts, prepare
from rollout_core.options import Options
from rollout_core.serving import budget


def _same(a: Any, b: Any) -> None:
    assert a.method == b.method and a.tokens == b.tokens and a.settings == b.settings
    assert np.allclose(a.scores, b.scores, atol=1e-12) and np.allclose(a.layer_scores, b.layer_scores, atol=1e-12)


def _picture() -> np.ndarray:
    return (np.random.default_rng(0).random((40, 56, 3)) * 255).astype(np.uint8)


def test_the_package_exports_the_entry_point(tiny_handle: Callable[[str], Any]) -> None:
    assert callable(rc.explain) and rc.prepare is prepare and rc.Options is Options
    assert inspect.signature(rc.explain) == inspect.signature(explain)  # what help() and notebooks show
    _same(rc.explain(tiny_handle("bert"), "the cat sat"), explain_text(tiny_handle("bert"), "the cat sat"))


def test_text_texts_and_image_equal_the_wrappers(tiny_handle: Callable[[str], Any]) -> None:
    bert, vit = tiny_handle("bert"), tiny_handle("vit")
    opts = Options(method="rollout", head_fusion="max", residual_weight=0.5, discard_ratio=0.25, start_layer=-2)
    _same(explain(bert, "the cat sat", opts, target=1), explain_text(bert, "the cat sat", target=1, **opts.kwargs()))
    batch = explain(bert, ["the cat", "a dog ran far"], opts)
    assert isinstance(batch, list)
    for got, want in zip(batch, explain_texts(bert, ["the cat", "a dog ran far"], **opts.kwargs())):
        _same(got, want)
    _same(explain(vit, _picture(), opts), explain_image(vit, _picture(), **opts.kwargs()))


def test_overrides_replace_fields_of_the_options(tiny_handle: Callable[[str], Any]) -> None:
    bert = tiny_handle("bert")
    got = explain(bert, "the cat", Options(method="attention", residual_weight=2.0), residual_weight=0.5)
    _same(got, explain_text(bert, "the cat", method="attention", residual_weight=0.5))
    with pytest.raises(InputError, match="unknown option 'fusion'"):
        explain(bert, "the cat", fusion="max")
    with pytest.raises(InputError, match="options must be an Options"):
        explain(bert, "the cat", {"method": "rollout"})


def test_the_modality_comes_from_the_model_or_is_given(tiny_handle: Callable[[str], Any], tmp_path: Any) -> None:
    vit = tiny_handle("vit")
    path = tmp_path / "x.png"
    Image.fromarray(_picture()).save(path)
    _same(explain(vit, str(path)), explain_image(vit, path))  # a string is a path for an image model
    with pytest.raises(InputError, match="image model; use explain_image"):
        explain(vit, "the cat", modality="text")
    with pytest.raises(InputError, match="modality must be"):
        explain(vit, "the cat", modality="audio")
    with pytest.raises(InputError, match="labels and max_length are options of text models"):
        explain(vit, _picture(), labels=["a", "b"])
    assert explain_module._modality(None, "a cat", None) == "text"
    assert explain_module._modality(None, ["a", "b"], None) == "text"
    assert explain_module._modality(None, _picture(), None) == "image"
    assert explain_module._modality(None, str(path), "image") == "image"


@pytest.mark.parametrize("kind", ["bert", "sentence"])
def test_a_prepared_text_counts_as_the_budget_counts_the_raw_text(kind: str, tiny_handle: Callable[[str], Any]) -> None:
    handle = tiny_handle(kind)
    prepared = prepare(handle, "the cat sat", method="flow")
    assert prepared.tokens == 5 and prepared.outputs == (5 if kind == "sentence" else 1)
    assert budget.check_prepared(prepared) == pytest.approx(budget.check_request(handle, "the cat sat", "flow"))
    _same(prepared.run(), explain_text(handle, "the cat sat", method="flow"))


def test_a_prepared_image_counts_as_the_budget_counts_the_raw_image(tiny_handle: Callable[[str], Any]) -> None:
    handle = tiny_handle("dinov2")
    prepared = prepare(handle, _picture(), method="flow")
    explained = prepared.run()
    assert prepared.tokens == len(explained.tokens)
    assert budget.check_prepared(prepared) == pytest.approx(budget.check_request(handle, _picture(), "flow"))
