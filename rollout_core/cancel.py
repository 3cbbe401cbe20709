"""Cooperative cancellation: a computation can be stopped from outside at its checkpoints.

Whoever starts a computation on behalf of someone who may leave (a page session, a warm-server client) runs it
inside `cancellable(should_stop)`; long loops call `checkpoint()` between their steps, which raises `Cancelled`
once `should_stop()` is true. Stdlib only, so pure maths can take part without importing the server.
"""
from __future__ import annotations

import threading
from contextlib import contextmanager
from typing import Callable, Iterator

from rollout_core.errors import InputError


class Cancelled(InputError):
    """A computation was stopped at a checkpoint because whoever asked for it is gone."""


_STOP = threading.local()


@contextmanager
def cancellable(should_stop: Callable[[], bool]) -> Iterator[None]:
    """Within the block, `checkpoint()` in this thread raises `Cancelled` once `should_stop()` is true."""
    previous = getattr(_STOP, "check", None)
    _STOP.check = should_stop
    try:
        yield
    finally:
        _STOP.check = previous


def stop_check() -> Callable[[], bool] | None:
    """The stop check `cancellable` set for this thread (None outside such a block), to hand to worker threads."""
    return getattr(_STOP, "check", None)


def stop_requested() -> bool:
    """Whether the computation running in this thread was asked to stop (without raising)."""
    check = stop_check()
    return check is not None and check()


def checkpoint() -> None:
    """Raise `Cancelled` when the computation running in this thread was asked to stop (see `cancellable`)."""
    if stop_requested():
        raise Cancelled("stopped: the page that asked for this computation was closed or changed")
