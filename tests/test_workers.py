"""`rollout_core.serving.workers.map_items` on threads: input order, the calling thread's stop reaches the workers,
no worker made for no items, clear errors. (On Ray: tests/test_ray_engines.py.)"""
from __future__ import annotations

import time

import pytest
import torch

from rollout_core import cancel
from rollout_core.errors import InputError
from rollout_core.serving.workers import map_items


def _slow_square(x: int) -> int:
    time.sleep(0.01 * (5 - x % 5))  # later items finish first: order must come from the input, not the clock
    return x * x


@pytest.mark.parametrize("workers", [1, 2, 3])
def test_results_come_in_input_order(workers: int) -> None:
    before = torch.get_num_threads()
    with map_items(lambda: _slow_square, list(range(12)), workers=workers) as results:
        assert list(results) == [x * x for x in range(12)]
    assert torch.get_num_threads() == before  # the workers' one-thread setting does not leak


def test_make_runs_once_and_not_at_all_for_no_items() -> None:
    made: list[int] = []

    def make():
        made.append(1)
        return abs

    with map_items(make, [], workers=2) as results:
        assert list(results) == []
    assert made == []
    with map_items(make, [-1, -2, -3], workers=2) as results:
        assert list(results) == [1, 2, 3]
    assert made == [1]


def test_a_stop_reaches_the_worker_threads_and_no_later_result_is_handed_out() -> None:
    ran_out: list[int] = []

    def item(x: int) -> int:
        if x >= 2:  # a long item that looks for a stop between its steps, as the maths does
            for _ in range(400):
                cancel.checkpoint()
                time.sleep(0.005)
            ran_out.append(x)  # only when the stop never reached this worker thread
        return x

    handed: list[int] = []
    with cancel.cancellable(lambda: len(handed) >= 2):
        with pytest.raises(cancel.Cancelled):
            with map_items(lambda: item, list(range(20)), workers=2) as results:
                for value in results:
                    handed.append(value)
    assert handed == [0, 1] and ran_out == []


def test_bad_engine_and_workers_are_one_clear_error() -> None:
    with pytest.raises(InputError, match="unknown engine 'spark'; choose local or ray"):
        with map_items(lambda: abs, [1], engine="spark"):
            pass
    for workers in (0, 1.5, True):
        with pytest.raises(InputError, match="workers must be a whole number >= 1"):
            with map_items(lambda: abs, [1], workers=workers):
                pass
