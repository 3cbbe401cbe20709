"""Attention knockout Shapley: the masks block what they say, the sampled values equal exact Shapley values (subset
enumeration) when every order is used, efficiency holds, and the method runs through explain_text."""
from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
import torch

from rollout_core.errors import RolloutError
from rollout_core.explain import explain_image, explain_text, explain_texts
from rollout_core.maths.knockout import (coalition_values, knockout_masks, knockout_shapley, order_coalitions,
                                         random_orders, shapley_from_orders)

TEXT = "the movie was good"


def _sample(handle, text: str = TEXT):
    inputs = {k: v for k, v in handle.processor([text], return_tensors="pt").items() if k != "attention_mask"}
    ids = inputs["input_ids"][0]
    removable = ~torch.isin(ids, torch.tensor(handle.processor.all_special_ids))
    run = lambda kw: handle.model(**kw).logits  # noqa: E731
    return inputs, removable, run


def test_masks_let_a_query_see_itself_and_the_readable_keys_only():
    mask = knockout_masks(torch.tensor([[True, False, True]]), torch.float32)[0, 0]
    blocked = mask < 0
    expected = torch.tensor([[False, True, False], [False, False, False], [False, True, False]])
    assert torch.equal(blocked, expected)  # column 1 blocked except on its own row


def test_a_token_nobody_may_attend_to_cannot_change_the_prediction(tiny_handle):
    handle = tiny_handle("bert")
    inputs, removable, run = _sample(handle)
    position = int(removable.nonzero()[1])
    readable = torch.ones_like(removable)[None].clone()
    readable[0, position] = False
    other = {k: v.clone() for k, v in inputs.items()}
    other["input_ids"][0, position] = (int(other["input_ids"][0, position]) + 7) % handle.model.config.vocab_size
    same = [coalition_values(run, x, readable, 1, torch.float32) for x in (inputs, other)]
    readable_again = torch.ones_like(readable)
    differ = [coalition_values(run, x, readable_again, 1, torch.float32) for x in (inputs, other)]
    assert torch.allclose(same[0], same[1], atol=1e-6)  # blocked: its content does not reach the read-out
    assert not torch.allclose(differ[0], differ[1], atol=1e-6)  # readable: it does


def test_every_order_gives_the_exact_shapley_values_of_subset_enumeration(tiny_handle):
    handle = tiny_handle("bert")
    inputs, removable, run = _sample(handle)
    players = removable.nonzero().flatten().tolist()
    m, n = len(players), len(removable)
    assert 2 <= m <= 5

    def value(coalition: tuple[int, ...]) -> float:
        readable = ~removable.clone()
        readable[list(coalition)] = True
        return float(coalition_values(run, inputs, readable[None], 0, torch.float32)[0])

    exact = np.zeros(n)
    for i in players:
        rest = [p for p in players if p != i]
        for size in range(m):
            for subset in itertools.combinations(rest, size):
                weight = math.factorial(size) * math.factorial(m - size - 1) / math.factorial(m)
                exact[i] += weight * (value(subset + (i,)) - value(subset))
    orders = [torch.tensor(p) for p in itertools.permutations(players)]
    values = coalition_values(run, inputs, order_coalitions(removable, orders), 0, torch.float32)
    found = shapley_from_orders(values, orders, n).numpy()
    np.testing.assert_allclose(found, exact, rtol=1e-3, atol=1e-8)  # float32: batches round slightly differently


def test_sampled_values_sum_to_the_whole_effect_and_come_in_antithetic_pairs(tiny_handle):
    handle = tiny_handle("bert")
    inputs, removable, run = _sample(handle, "the plot was dull and the acting was worse")
    orders = random_orders(removable, 6, seed=3)
    assert all(torch.equal(orders[k + 1], orders[k].flip(0)) for k in range(0, 6, 2))
    scores = knockout_shapley(run, inputs, removable, 1, torch.float32, count=6)
    ends = coalition_values(run, inputs, torch.stack([~removable, torch.ones_like(removable)]), 1, torch.float32)
    assert float(scores.sum()) == pytest.approx(float(ends[1] - ends[0]), rel=1e-3, abs=1e-8)
    assert (scores[~removable] == 0).all()


def test_each_distinct_coalition_runs_once_with_the_same_values(tiny_handle):
    handle = tiny_handle("bert")
    inputs, removable, run = _sample(handle, "the plot was dull and the acting was worse")
    seen: list[int] = []

    def counted(kw):
        seen.append(len(kw["input_ids"]))
        return run(kw)

    scores = knockout_shapley(counted, inputs, removable, 1, torch.float32, count=6)
    m = int(removable.sum())
    assert sum(seen) == 6 * (m - 1) + 2  # 6 orders share the specials-only and the all-readable coalitions
    orders = random_orders(removable, 6)
    every = coalition_values(run, inputs, order_coalitions(removable, orders), 1, torch.float32)
    np.testing.assert_allclose(scores.numpy(), shapley_from_orders(every, orders, len(removable)).numpy(),
                               rtol=1e-4, atol=1e-6)


def test_explains_through_the_registry_and_a_batch_equals_single_texts(tiny_handle):
    handle = tiny_handle("bert")
    texts = ["the movie was very good and fun", "bad plot"]
    for batched, text in zip(explain_texts(handle, texts, method="knockout_shapley"), texts):
        alone = explain_text(handle, text, method="knockout_shapley")
        np.testing.assert_allclose(batched.scores, alone.scores, atol=1e-6)
    asked = explain_text(handle, TEXT, method="knockout_shapley", target=0)
    predicted = explain_text(handle, TEXT, method="knockout_shapley")
    assert asked.target != predicted.target or not np.allclose(asked.scores, predicted.scores)


def test_models_it_cannot_read_get_a_clear_error(tiny_handle):
    from PIL import Image

    with pytest.raises(RolloutError, match="knockout"):
        explain_image(tiny_handle("vit"), Image.new("RGB", (32, 32)), method="knockout_shapley")
    with pytest.raises(RolloutError, match="knockout"):
        explain_text(tiny_handle("gpt2"), TEXT, method="knockout_shapley")


def test_evaluate_measures_it_on_text_only():
    from rollout_core.errors import InputError
    from rollout_core.faithfulness.datasets import check_methods

    assert "knockout_shapley" in check_methods(None, "text")
    assert "knockout_shapley" not in check_methods(None, "image") and "rollout" in check_methods(None, "image")
    with pytest.raises(InputError, match="knockout_shapley cannot explain image inputs"):
        check_methods(["rollout", "knockout_shapley"], "image")
