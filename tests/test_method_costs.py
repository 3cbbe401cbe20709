"""Issue 24 item 2 (cost): every registered method owns its cost estimate (`MethodSpec.seconds` on a `Workload`), the
estimate grows with the sizes that drive the method's work, and the budget refuses over-limit work for any method with
one line naming a cheaper choice, asking the registry (it names no method itself). Estimate vs measured time:
benchmarks/bench_method_costs.py."""
from __future__ import annotations

import ast
import dataclasses
from pathlib import Path

import pytest

from rollout_core import methods
from rollout_core.methods._spec import Workload
from rollout_core.serving import budget
from rollout_core.serving.budget import BudgetError

ROOT = Path(__file__).resolve().parents[1]
TEXT = Workload(tokens=64, layers=6, model_layers=6, heads=12, hidden=384)
IMAGE = Workload(tokens=197, layers=12, model_layers=12, heads=6, hidden=384, image=True)


@pytest.mark.parametrize("name", methods.names())
def test_every_registered_method_declares_a_positive_cost(name: str):
    spec = methods.get(name)
    assert spec.cost is not None, f"{name} declares no cost"
    assert spec.cost.__module__ == f"rollout_core.methods.{name}", "a method's cost lives in its own module"
    for work in (TEXT, IMAGE, dataclasses.replace(TEXT, tokens=1, layers=1, model_layers=1)):
        assert spec.seconds(work) > 0


@pytest.mark.parametrize("name", methods.names())
@pytest.mark.parametrize("size", ["tokens", "model_layers", "batch", "hidden"])
def test_the_cost_grows_with_the_input_and_the_model(name: str, size: str):
    """Every method runs at least one forward pass: more positions, layers, inputs or width cost more."""
    spec = methods.get(name)
    costs = [spec.seconds(dataclasses.replace(TEXT, **{size: getattr(TEXT, size) * k})) for k in (1, 2, 4)]
    assert costs[0] < costs[1] < costs[2], costs


@pytest.mark.parametrize("name", methods.names())
def test_a_batch_costs_about_its_inputs_one_by_one(name: str):
    """Five inputs in one call: more than one, at most five calls (the call's own handling is paid once), and
    mostly the five inputs' work."""
    spec = methods.get(name)
    one, five = spec.seconds(TEXT), spec.seconds(dataclasses.replace(TEXT, batch=5))
    assert one < five <= 5 * one and five > 3 * one


def test_the_costs_grow_as_their_methods_work():
    """The shapes each method's work has: rollout's product grows with the explained range; value zeroing re-runs
    every layer once per token and knockout Shapley the model about 8 times per token (so 4x the tokens costs more
    than 4x); flow's full matrix costs more than its explained row; gradients add a backward pass."""
    def seconds(name: str, **changes) -> float:
        return methods.get(name).seconds(dataclasses.replace(TEXT, **changes))

    for name in ("rollout", "flow", "alti"):
        assert seconds(name, layers=2) < seconds(name, layers=6)
    for name in ("value_zeroing", "knockout_shapley"):
        assert seconds(name, tokens=256) > 4 * seconds(name, tokens=64)
        assert seconds(name) > 10 * seconds("rollout")
    assert seconds("flow", full_matrix=True) > seconds("flow")
    assert seconds("gradient") > seconds("attention") and seconds("attnlrp") > seconds("attention")
    assert seconds("alti") > seconds("norm") > seconds("attention")


@pytest.mark.parametrize("name", methods.names())
def test_the_budget_refuses_any_method_over_the_limit_in_one_line_naming_a_cheaper_choice(name: str):
    big = dataclasses.replace(TEXT, tokens=384)
    seconds = budget.estimate_seconds(name, big)
    limit = seconds * 0.9
    with pytest.raises(BudgetError) as err:
        budget.check(name, big, limit=limit)
    message = str(err.value)
    assert "\n" not in message and budget.in_words(seconds) in message
    assert message.startswith(f"{methods.get(name).title} on 384 tokens") and f"({name})" not in message
    offered = [s for s in methods.all_methods() if s.name != name and f"use {s.title} (" in message]
    fits = message.split("shorten the text to about ")[1].split()[0] if "shorten the text" in message else None
    assert offered or fits, message
    for spec in offered:  # the named method is cheaper than the limit, and so is the suggested length
        assert spec.seconds(big) <= limit
    if fits is not None:
        assert budget.estimate_seconds(name, dataclasses.replace(big, tokens=int(fits))) <= limit
    assert budget.check(name, big, limit=seconds * 1.1) == pytest.approx(seconds)


def test_the_cheaper_choice_follows_the_caller_s_preference_among_those_that_fit():
    slow = dataclasses.replace(TEXT, tokens=256)
    limit = budget.estimate_seconds("alti", slow) * 1.01
    with pytest.raises(BudgetError, match=r"use ALTI rollout \("):
        budget.check("value_zeroing", slow, limit=limit, choices=("alti", "rollout", "value_zeroing"))
    with pytest.raises(BudgetError, match=r"use Attention rollout \("):
        budget.check("value_zeroing", slow, limit=limit, choices=("flow", "rollout"))
    assert [name for name, _ in budget.cheaper("flow", slow, ("flow", "rollout", "norm"), limit)] == ["rollout", "norm"]


def test_a_batch_over_the_limit_is_told_to_explain_fewer_rows():
    rows = dataclasses.replace(TEXT, batch=200)
    with pytest.raises(BudgetError, match="x 200 inputs.*explain fewer rows"):
        budget.check("rollout", rows, limit=budget.estimate_seconds("rollout", rows) / 2, choices=("rollout",))


def test_the_budget_names_no_method():
    """The budget asks the registry: no string in serving/ is a registered method's id."""
    ids = set(methods.names())
    for path in (ROOT / "rollout_core" / "serving").glob("*.py"):
        literals = {node.value for node in ast.walk(ast.parse(path.read_text()))
                    if isinstance(node, ast.Constant) and isinstance(node.value, str)}
        assert not literals & ids, (path.name, literals & ids)


@pytest.mark.parametrize("discard", [0.0, 0.3])
def test_rollouts_estimate_counts_the_products_its_maths_runs(discard: float):
    """Issue 29: rollout computes its explained rows after each layer and leaves the final n x n product to its first
    reader, except when discarding; the estimate's part beyond the forward pass is the flops torch counts in
    rollout's compute (FlopCounterMode, a reference outside our code) at the product rate."""
    import torch
    from torch.utils.flop_counter import FlopCounterMode

    from rollout_core.capture import Captured
    from rollout_core.methods._cost import PRODUCT_FLOPS_PER_SECOND, forward_seconds
    from rollout_core.options import Options

    n, layers = 48, 5
    attentions = tuple(torch.softmax(torch.randn(1, 4, n, n, generator=torch.Generator().manual_seed(l)), -1)
                       for l in range(layers))
    weights = torch.zeros(1, n, dtype=torch.float64)
    weights[0, 0] = 1.0
    options = Options(method="rollout", discard_ratio=discard, start_layer=0, end_layer=layers)
    given = methods.MethodInput(None, {}, Captured(attentions, None, None), options, None, weights, full_matrix=True)
    with FlopCounterMode(display=False) as counter:
        methods.compute(methods.get("rollout"), given)
    work = Workload(tokens=n, layers=layers, model_layers=layers, heads=4, hidden=32, discard=discard > 0)
    estimated = (methods.get("rollout").seconds(work) - forward_seconds(work)) * PRODUCT_FLOPS_PER_SECOND
    assert estimated == pytest.approx(counter.get_total_flops(), rel=1e-9)
    assert (estimated > n ** 3) == (discard > 0)  # without discarding, no n x n product is paid
