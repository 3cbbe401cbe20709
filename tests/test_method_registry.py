"""The method registry: one list of methods that explain, the CLI, evaluate and the summary all read."""
from __future__ import annotations

import argparse
import dataclasses
import sys

import numpy as np
import pytest

from explanations import make_explanation
from rollout_core import cli, methods
from rollout_core.errors import InputError
from rollout_core.explanation import Explanation, Prediction
from rollout_core.summary import summarize

KNOWN = {"rollout", "flow", "gradient", "attention", "attnlrp", "knockout_shapley", "norm", "alti", "alti_tuned",
         "value_zeroing", "sink_free", "grad_x_input", "integrated_gradients"}
"""The methods the project ships, written out by hand."""

FAKE_METHOD = '''
from rollout_core.methods._spec import MethodOutput, MethodSpec


def compute(method_input):
    import torch

    layers = method_input.options.end_layer - method_input.options.start_layer
    batch, n = method_input.weights.shape
    rows = torch.arange(n, dtype=torch.float64).repeat(layers, batch, 1)  # 0, 1, 2, ... along the tokens
    return MethodOutput(layer_rows=rows, matrix=None)


METHOD = MethodSpec(name="fake", title="Fake method", phrase="fake propagation", description="A test double.",
                    class_specific=True, compute=compute)
'''


@pytest.fixture
def fresh_registry():
    """Discovery runs again in the test and once more afterwards, so a patched package path does not leak."""
    methods.all_methods.cache_clear()
    yield
    methods.all_methods.cache_clear()
    sys.modules.pop("rollout_core.methods.fake", None)


def _method_choices(parser: argparse.ArgumentParser, command: str, option: str) -> list[str]:
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    action = next(a for a in sub.choices[command]._actions if option in a.option_strings)
    return list(action.choices)


def test_registry_lists_the_shipped_methods_without_torch():
    assert set(methods.names()) == KNOWN and len(methods.names()) == len(KNOWN)
    assert methods.names()[0] == "rollout"  # the default is offered first
    assert [s.name for s in methods.all_methods() if s.class_specific] == ["gradient", "attnlrp", "knockout_shapley",
                                                                            "grad_x_input", "integrated_gradients"]
    assert [s.name for s in methods.all_methods() if s.needs_gradients] == ["gradient", "attnlrp"]
    assert [s.name for s in methods.all_methods() if s.can_stream] == ["rollout"]
    assert [s.name for s in methods.all_methods() if not s.cumulative] == ["attention", "attnlrp", "knockout_shapley",
                                                                          "grad_x_input", "integrated_gradients"]
    assert [s.name for s in methods.all_methods() if not s.layered] == ["attnlrp", "knockout_shapley", "grad_x_input",
                                                                      "integrated_gradients"]  # one map
    for spec in methods.all_methods():
        assert spec.title and spec.phrase and spec.description


@pytest.mark.parametrize("name", sorted(KNOWN))
def test_every_registered_method_explains_a_text(tiny_handle, name, monkeypatch):
    from rollout_core.explain import explain_text
    from rollout_core.models import registry

    assert name in methods.names()
    handle = tiny_handle("bert")
    if name == "alti_tuned":  # runs only on a model whose fine-tuned blocks are recorded
        entry = registry.RegistryEntry(handle.name, "bert", "text-classification", "text", "tiny", embedded=True,
                                       first_tuned_layer=1)
        monkeypatch.setattr(registry, "lookup", lambda model: entry if model == handle.name else None)
    e = explain_text(handle, "the cat sat", method=name)
    scores = np.asarray(e.scores)
    assert e.method == name and scores.shape == (len(e.tokens),) and np.isfinite(scores).all()


def test_unknown_method_names_every_choice(tiny_handle):
    from rollout_core.explain import explain_text

    with pytest.raises(InputError) as raised:
        methods.get("bogus")
    assert all(name in str(raised.value) for name in KNOWN)
    with pytest.raises(InputError, match="unknown method 'bogus'.*rollout, flow, gradient, attention"):
        explain_text(tiny_handle("bert"), "the cat sat", method="bogus")


def test_cli_and_evaluate_offer_exactly_the_registry(capsys):
    from rollout_core.faithfulness import cli_evaluate, evaluate

    parser = cli.build_parser()
    assert _method_choices(parser, "text", "--method") == list(methods.names())
    assert _method_choices(parser, "image", "--method") == list(methods.names())
    assert _method_choices(parser, "text", "--head-fusion") == ["mean", "max", "min"]
    # evaluation measures the attention-free references only when asked: they are the registry's last two
    assert (*evaluate.METHODS, *evaluate.REFERENCES) == methods.names()
    choices = next(a for a in cli_evaluate.build_parser()._actions if "--methods" in a.option_strings).choices
    assert list(choices) == list(methods.names())
    with pytest.raises(SystemExit) as stop:
        cli.main(["text", "--text", "hi", "--method", "bogus"])
    err = capsys.readouterr().err
    assert stop.value.code == 2 and err.count("\n") == 1 and err.startswith("error: ") and "'gradient'" in err


def test_a_dropped_in_module_becomes_a_method(tmp_path, monkeypatch, fresh_registry, tiny_handle):
    (tmp_path / "fake.py").write_text(FAKE_METHOD)
    monkeypatch.setattr(methods, "__path__", [*methods.__path__, str(tmp_path)])
    assert methods.names()[-1] == "fake" and methods.get("fake").title == "Fake method"
    assert "fake" in _method_choices(cli.build_parser(), "text", "--method")
    assert "fake" in summarize(_expl("rollout", "POSITIVE"))  # offered as the class-specific alternative
    from rollout_core.explain import explain_text

    e = explain_text(tiny_handle("bert"), "the cat sat", method="fake")  # explain runs the module's compute
    scores = np.asarray(e.scores)
    assert e.method == "fake" and np.all(np.diff(scores[~np.asarray(e.special)]) > 0)


def _expl(method: str, target: str) -> Explanation:
    tokens = ["[CLS]", "good", "soup", "[SEP]"]
    scores = np.array([0.1, 0.5, 0.3, 0.1])
    return make_explanation(
        tokens, scores, method=method, layers=2,
        settings={"head_fusion": "mean", "model_heads": 2, "start_layer": 0, "task": "text-classification"},
        target_description=f"row of [CLS]; class '{target}'",
        prediction=[Prediction("NEGATIVE", 0.6, 0), Prediction("POSITIVE", 0.4, 1)], target=target,
        text="good soup", offsets=[(0, 0), (0, 4), (5, 9), (0, 0)],
    )


def test_summary_wording_comes_from_the_spec(monkeypatch):
    patched = tuple(dataclasses.replace(s, phrase="zig-zag propagation") if s.name == "flow" else s
                    for s in methods.all_methods())
    monkeypatch.setattr(methods, "all_methods", lambda: patched)
    text = summarize(_expl("flow", "POSITIVE"))
    assert "Method: zig-zag propagation through 2 layers, mean over 2 heads" in text
    assert "plain zig-zag propagation is class-agnostic" in text
    # making flow class-specific removes the class-agnostic note and names the class instead
    specific = tuple(dataclasses.replace(s, class_specific=True) if s.name == "flow" else s for s in patched)
    monkeypatch.setattr(methods, "all_methods", lambda: specific)
    text = summarize(_expl("flow", "POSITIVE"))
    assert "class-agnostic" not in text and "zig-zag propagation for class POSITIVE through 2 layers" in text
