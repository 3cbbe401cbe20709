"""Issue 26 item 5: the deletion baseline must change the model's mind. Removing everything must take the predicted
class to about chance; when the default removal does not, the next one that does is used and the reader is told,
and a note says when the curves cannot separate the methods."""
from __future__ import annotations

import math
from pathlib import Path
from typing import Callable

import pytest
import torch

from rollout_core.faithfulness import baseline as checks
from rollout_core.faithfulness.baseline import SEPARATION, checked_baseline, separation_note
from rollout_core.inputs.continuous import PreparedInput


def _prepared(fill: float, name: str) -> PreparedInput:
    """Three positions (the first special); class 0's logit is the sum of the features, class 1's is 0, so an input
    whose removable features are all `fill` gives class 0 the probability sigmoid(fill * 2 + 1)."""
    x = torch.tensor([[[1.0], [3.0], [3.0]]])
    removed = torch.tensor([[[1.0], [fill], [fill]]])
    owner = torch.arange(3)[:, None]

    def forward(batch: torch.Tensor) -> torch.Tensor:
        total = batch.sum(dim=(1, 2))
        return torch.stack([total, torch.zeros_like(total)], dim=1)

    return PreparedInput(3, torch.tensor([False, True, True]), x, removed, owner, forward, baseline_name=name)


def _sigmoid(v: float) -> float:
    return 1 / (1 + math.exp(-v))


FILLS = {"keeps": 3.0, "halves": -0.5, "flips": -5.0}


def _check(names: tuple[str, ...]):  # noqa: ANN202 - the check's triple
    first = _prepared(FILLS[names[0]], names[0])
    removed = first.probabilities(torch.zeros(1, 3, dtype=torch.bool))
    return checked_baseline(lambda n: _prepared(FILLS[n], n), names, 0, first=(first, removed))


def test_the_first_removal_that_reaches_chance_is_used_and_the_reader_is_told() -> None:
    prepared, check, probs = _check(("keeps", "halves", "flips"))
    assert prepared.baseline_name == check.name == "halves"  # sigmoid(0) = 50%: chance for two classes
    assert [n for n, _ in check.tried] == ["keeps", "halves"]
    assert check.tried[0][1] == pytest.approx(_sigmoid(7.0)) and check.removed == pytest.approx(0.5)
    assert probs[0, 0] == pytest.approx(0.5) and check.passed
    note = check.note("positive")
    assert "leaves positive at 100%" in note and "instead (50% with everything removed)" in note


def test_a_removal_that_works_first_needs_no_note() -> None:
    _, check, _ = _check(("halves", "keeps"))
    assert check.name == "halves" and len(check.tried) == 1 and check.note("positive") is None


def test_when_no_removal_reaches_chance_the_strongest_is_used_and_said_to_fail(monkeypatch) -> None:  # noqa: ANN001
    monkeypatch.setattr(checks, "NEAR_CHANCE", -1.0)  # nothing counts as near chance
    prepared, check, _ = _check(("keeps", "halves", "flips"))
    assert check.name == prepared.baseline_name == "flips" and not check.passed  # the lowest: sigmoid(-9)
    assert [n for n, _ in check.tried] == ["keeps", "halves", "flips"]
    assert "No removal moves positive near chance" in check.note("positive")


def test_curves_that_end_up_together_are_said_not_to_separate_the_methods() -> None:
    close = {"rollout": 0.50, "attention": 0.52, "random": 0.51}
    apart = {"rollout": 0.30, "attention": 0.52, "random": 0.71}
    assert separation_note(close, {m: v + 0.01 for m, v in close.items()}) is not None
    assert separation_note(close, apart) is None and separation_note(apart, close) is None
    assert separation_note({"a": 0.0, "b": SEPARATION}, {"a": 0.0, "b": 0.0}) is None  # the bound itself separates


def test_a_fixed_baseline_is_kept_and_data_sets_keep_the_recorded_one(tiny_handle, monkeypatch) -> None:  # noqa: ANN001
    from rollout_core.faithfulness.evaluate import evaluate_input

    monkeypatch.setattr(checks, "NEAR_CHANCE", -1.0)
    handle = tiny_handle("bert")
    fixed = evaluate_input(handle, "the film was great but slow", ["rollout"], baseline="mask")
    assert fixed.baseline.name == "mask" and fixed.baseline.tried == (("mask", fixed.baseline.removed),)
    # the removal the curves used: their deletion end (everything removed) is the check's probability
    end = fixed.curves.query("method == 'rollout' and curve == 'deletion'")["value"].iloc[-1]
    assert end == pytest.approx(fixed.baseline.removed, abs=1e-6)
    checked = evaluate_input(handle, "the film was great but slow", ["rollout"])
    assert [n for n, _ in checked.baseline.tried] == ["mask", "pad", "unk"]
    assert any("No removal moves" in n for n in checked.notes)
    end = checked.curves.query("method == 'rollout' and curve == 'deletion'")["value"].iloc[-1]
    assert end == pytest.approx(checked.baseline.removed, abs=1e-6)


def test_the_page_shows_the_baseline_and_its_warning(tiny_model_dir: Callable[[str], Path], monkeypatch) -> None:  # noqa: ANN001
    from test_pages_apptest import assert_clean, page, texts

    at = page("app_pages/evaluate.py", model=str(tiny_model_dir("bert")), text="a good film")
    at.button[0].click().run()
    assert_clean(at)
    assert any("Removed positions became the [MASK] token" in c for c in texts(at.caption))
    monkeypatch.setattr(checks, "NEAR_CHANCE", -1.0)
    monkeypatch.setattr(checks, "SEPARATION", 10.0)  # every set of areas counts as together
    at = page("app_pages/evaluate.py", model=str(tiny_model_dir("bert")), text="a fine film")
    at.button[0].click().run()
    assert_clean(at)
    warnings = texts(at.warning)
    assert any("No removal moves" in w and "deletion cannot separate the methods" in w for w in warnings)
    assert any("cannot tell the methods apart on this input" in w for w in warnings)


@pytest.mark.slow
def test_a_circle_on_default_image_is_deleted_with_a_blur_that_reaches_chance() -> None:
    from rollout_core.data import shapes
    from rollout_core.errors import RolloutError
    from rollout_core.faithfulness.evaluate import evaluate_input
    from rollout_core.models.loading import load_model

    try:
        handle = load_model("default-image")
    except RolloutError as err:
        pytest.skip(f"default-image not available: {err}")
    circle = next(s for s in shapes.generate(10, split="test") if s.label == "circle")
    result = evaluate_input(handle, circle.image, ["rollout"])
    # a flat mean-colour image is a circle to this model: the mean colour cannot delete a circle
    assert result.predicted == "circle" and result.baseline.tried[0][0] == "mean"
    assert result.baseline.tried[0][1] > 0.9 and result.baseline.name != "mean" and result.baseline.passed
    assert any("mean colour leaves circle at" in n for n in result.notes)
