"""`explain_methods`: one input explained by several methods, methods with the same forward pass sharing it. Each
result must equal the method's own `explain` bit for bit (every array, the prediction, the settings), whatever
shares a pass with it; only what is the same pass is shared (counted forwards)."""
from __future__ import annotations

from typing import Any, Callable

import numpy as np
import pytest

from rollout_core import capture, methods
from rollout_core.errors import InputError
from rollout_core.explain import explain, explain_methods

FIELDS = ("tokens", "special", "scores", "layer_scores", "layer_attention_scores", "matrix", "layer_attention",
          "head_attention", "prediction", "warnings", "method")


def _same(got: Any, want: Any, where: str) -> None:
    for name in FIELDS:
        a, b = getattr(got, name, None), getattr(want, name, None)
        if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
            assert a is not None and b is not None and a.dtype == b.dtype and np.array_equal(a, b), f"{where}: {name}"
        else:
            assert a == b, f"{where}: {name}"
    settings = [{k: v for k, v in e.settings.items() if k != "versions"} for e in (got, want)]
    assert settings[0] == settings[1], where
    assert got.extras.keys() == want.extras.keys(), where


def _picture() -> np.ndarray:
    return (np.random.default_rng(1).random((32, 32, 3)) * 255).astype(np.uint8)


@pytest.mark.parametrize("kind", ["bert", "roberta", "gpt2", "t5", "vit", "deit", "dinov2"])
@pytest.mark.parametrize("options", [{}, {"head_fusion": "max", "discard_ratio": 0.25, "start_layer": 1},
                                     {"keep_heads": True, "residual_weight": 0.5}])
def test_every_method_equals_its_own_explanation(tiny_handle: Callable[[str], Any], kind: str,
                                                 options: dict[str, Any]) -> None:
    handle = tiny_handle(kind)
    source = _picture() if handle.modality == "image" else "the film was not good at all"
    names = [s.name for s in methods.runnable(handle) if not s.attention_free]
    assert {"rollout", "attention"} <= set(names)
    together = explain_methods(handle, source, names, **options)
    assert list(together) == names
    for name in names:
        _same(together[name], explain(handle, source, method=name, **options), f"{kind} {name} {options}")


def test_a_target_reaches_every_method(tiny_handle: Callable[[str], Any]) -> None:
    bert = tiny_handle("bert")
    together = explain_methods(bert, "a dog ran far", ["gradient", "rollout"], target=1)
    for name, got in together.items():
        _same(got, explain(bert, "a dog ran far", method=name, target=1), name)
    other = explain_methods(bert, "a dog ran far", ["gradient"], target=0)["gradient"]
    assert not np.array_equal(other.scores, together["gradient"].scores)  # the target did change the map


def test_methods_with_the_same_forward_pass_share_it(tiny_handle: Callable[[str], Any],
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    forwards: list[bool] = []
    real = capture.forward

    def counted(model: Any, inputs: Any, **kwargs: Any) -> Any:
        forwards.append(bool(kwargs.get("output_hidden_states")))
        return real(model, inputs, **kwargs)

    monkeypatch.setattr(capture, "forward", counted)
    bert, vit = tiny_handle("bert"), tiny_handle("vit")
    explain_methods(bert, "the cat sat", ["rollout", "attention", "flow"])
    assert len(forwards) == 1  # three attention methods, one pass
    forwards.clear()
    explain_methods(bert, "the cat sat", ["rollout", "gradient", "attention", "alti"])
    assert len(forwards) == 3  # the gradient and the recording method each need a pass of their own
    forwards.clear()
    explain_methods(vit, _picture(), ["attention", "rollout"], head_fusion="min")
    assert len(forwards) == 1
    forwards.clear()
    explain_methods(bert, "the cat sat", ["rollout", "attention"], keep_heads=True)
    assert len(forwards) == 1  # the full capture (per-head maps kept) is shared too


def test_only_passes_of_attention_only_methods_run_without_autograd(tiny_handle: Callable[[str], Any],
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """Attention-only methods run their pass in torch.inference_mode; a pass shared with a method that differentiates
    (gradient x input reads the same per-head capture) keeps autograd, and both still equal their own explanations."""
    import torch

    modes: list[bool] = []
    real = capture.forward

    def recorded(model: Any, inputs: Any, **kwargs: Any) -> Any:
        modes.append(torch.is_inference_mode_enabled())
        return real(model, inputs, **kwargs)

    monkeypatch.setattr(capture, "forward", recorded)
    bert = tiny_handle("bert")
    explain_methods(bert, "the cat sat", ["rollout", "attention", "flow"])
    assert modes == [True]
    modes.clear()
    together = explain_methods(bert, "the cat sat", ["attention", "grad_x_input"], keep_heads=True)
    assert modes == [False]  # one pass, shared with a method that differentiates
    monkeypatch.setattr(capture, "forward", real)
    for name, got in together.items():
        _same(got, explain(bert, "the cat sat", method=name, keep_heads=True), name)
    assert not torch.is_inference_mode_enabled()


def test_a_method_named_twice_is_explained_once(tiny_handle: Callable[[str], Any]) -> None:
    got = explain_methods(tiny_handle("bert"), "the cat sat", ["rollout", "rollout", "attention"])
    assert list(got) == ["rollout", "attention"]


@pytest.mark.parametrize("names, message", [
    ("rollout", "a non-empty list of method names"),
    ([], "a non-empty list of method names"),
    (["rollout", 3], "a non-empty list of method names"),
    (["rollout", "nope"], "nope"),
])
def test_bad_method_lists_are_refused(tiny_handle: Callable[[str], Any], names: Any, message: str) -> None:
    with pytest.raises(InputError, match=message):
        explain_methods(tiny_handle("bert"), "the cat sat", names)


def test_a_list_of_texts_is_refused(tiny_handle: Callable[[str], Any]) -> None:
    with pytest.raises(InputError, match="one text or image"):
        explain_methods(tiny_handle("bert"), ["the cat", "a dog"], ["rollout"])


def test_the_package_exports_it() -> None:
    import rollout_core

    assert rollout_core.explain_methods is explain_methods
