"""Issue 16: integrated gradients, the perturbation scorer and dataset evaluations stop at their checkpoints once
the session that asked for them is gone (`rollout_core.cancel.cancellable`)."""
from __future__ import annotations

import pytest
import torch

from rollout_core import cancel
from rollout_core.cancel import Cancelled
from rollout_core.methods import integrated_gradients
from rollout_core.faithfulness.evaluate import evaluate_dataset, summarize
from rollout_core.inputs.continuous import PreparedInput


class CountingNet(torch.nn.Module):
    """A small MLP over 4 positions x 3 features that counts its forward passes."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.net = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(12, 16), torch.nn.Tanh(),
                                       torch.nn.Linear(16, 3)).double()
        self.calls = 0

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.calls += 1
        return self.net(x)


def _prepared() -> tuple[PreparedInput, CountingNet]:
    net = CountingNet()
    x = torch.randn(1, 4, 3, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    owner = torch.arange(4)[:, None].expand(4, 3)
    return PreparedInput(4, torch.ones(4, dtype=torch.bool), x, torch.zeros_like(x), owner, net), net


def test_integrated_gradients_stop_after_the_first_steps():
    prepared, net = _prepared()
    with cancel.cancellable(lambda: net.calls >= 1):
        with pytest.raises(Cancelled):
            integrated_gradients.attribute(prepared, 2, steps=32)
    assert net.calls == 1  # one chunk of 8 of the 32 steps, then stopped

    net.calls = 0
    with cancel.cancellable(lambda: False):
        scores = integrated_gradients.attribute(prepared, 2, steps=32)
    assert net.calls >= integrated_gradients.CHUNKS  # the steps ran in chunks, each after a checkpoint
    with torch.no_grad():  # completeness: the attributions add up to f(x) - f(baseline)
        gap = float(net.net(prepared.x)[0, 2] - net.net(prepared.baseline)[0, 2])
    assert float(scores.sum()) == pytest.approx(gap, abs=1e-3)


def test_the_perturbation_scorer_stops_between_batches():
    prepared, net = _prepared()
    keep = torch.ones(3 * 64, 4, dtype=torch.bool)  # three batches of MAX_BATCH = 64
    with cancel.cancellable(lambda: net.calls >= 1):
        with pytest.raises(Cancelled):
            prepared.probabilities(keep)
    assert net.calls == 1
    net.calls = 0
    assert prepared.probabilities(keep).shape == (192, 3) and net.calls == 3


def test_a_dataset_evaluation_stops_between_examples(tiny_handle, tmp_path):
    import pandas as pd

    csv = tmp_path / "three.csv"
    pd.DataFrame({"text": ["the film was great", "it was bad", "a dog sat"],
                  "label": ["positive", "0", "positive"]}).to_csv(csv, index=False)
    calls: list[tuple[int, int]] = []
    done: list[dict] = []
    with cancel.cancellable(lambda: len(calls) >= 2):  # stop once the first example is done
        with pytest.raises(Cancelled):
            evaluate_dataset(tiny_handle("bert"), csv, methods=("rollout",), agreement=False, collect=done,
                             progress=lambda done, total: calls.append((done, total)))
    assert calls == [(0, 3), (1, 3)]
    # the stopped run's finished example is kept, and equals that example evaluated alone
    alone = evaluate_dataset(tiny_handle("bert"), csv, methods=("rollout",), agreement=False, limit=1)
    assert {row["example"] for row in done} == {0}
    pd.testing.assert_frame_equal(summarize(done, ["rollout"], 1).summary, alone.summary)
