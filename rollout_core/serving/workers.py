"""Map a function over items, on threads of this process or on Ray actors, results in input order.

One mechanism for every batch job (the corpus's batches, the evaluation's examples):
- engine "local": `workers` threads of one torch thread each (1: the calling thread with torch's own thread count).
  Why: splitting every small matrix product of one item over the cores wastes about half the CPU on
  synchronisation (OpenMP threads spin while they wait, and far more when other jobs share the cores); whole
  items per core do not.
- engine "ray": `workers` Ray actors of one CPU each (RAY_ADDRESS or `address` points at a cluster), fed one item
  at a time, so results arrive item by item as on threads. Ray is optional: `pip install "rollout-dashboard[ray]"`.

Each worker calls `make()` once for its function (a Ray actor loads its model once; on threads `make()` runs once
in the calling thread, so `make` must be picklable only for Ray). Stop: when the calling thread was asked to stop
(`rollout_core.cancel.cancellable`), no further result is handed out; threads stop at their next `checkpoint()`,
Ray actors are ended.
"""
from __future__ import annotations

from collections import deque
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from typing import Any, Callable, Iterator, Sequence

import torch

from rollout_core.cancel import cancellable, checkpoint, stop_check
from rollout_core.errors import InputError
from rollout_core.extras import require
from rollout_core.serving.malloc import limit_arenas

ENGINES = ("local", "ray")
Maker = Callable[[], Callable[[Any], Any]]
"""Makes a worker's function (once per worker); picklable for Ray (a module-level function or a partial of one)."""
RAY_QUEUED = 2
"""Items queued per Ray actor, so an actor never waits for the driver between two items."""
RAY_POLL_SECONDS = 0.1
"""How often the driver looks for a stop while it waits for Ray."""


@contextmanager
def map_items(make: Maker, items: Sequence[Any], *, engine: str = "local", workers: int = 1,
              address: str | None = None) -> Iterator[Iterator[Any]]:
    """For the block: an iterator over `make()(item)` for each of `items`, in input order, computed by `workers`
    threads or Ray actors (`engine`). Raises `Cancelled` before handing out a result once the calling thread was
    asked to stop; leaving the block stops the workers."""
    if engine not in ENGINES:
        raise InputError(f"unknown engine {engine!r}; choose {' or '.join(ENGINES)}")
    if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
        raise InputError(f"workers must be a whole number >= 1, not {workers!r}")
    if not items:  # nothing to do: no worker made (no model loaded, no actor started)
        yield iter(())
        return
    with (_threads if engine == "local" else _ray)(make, items, workers, address) as results:
        yield _checked(results)


def _checked(results: Iterator[Any]) -> Iterator[Any]:
    for result in results:
        checkpoint()  # a stopped run hands out no result finished after the stop
        yield result


@contextmanager
def _threads(make: Maker, items: Sequence[Any], workers: int, address: str | None) -> Iterator[Iterator[Any]]:
    """`workers` threads of one torch thread each (torch's thread count restored after) that carry the calling
    thread's stop check; for one worker, the calling thread itself."""
    fn, check = make(), stop_check()

    def call(item: Any) -> Any:
        checkpoint()  # a stopped run starts no further item
        return fn(item)

    if workers == 1:
        yield map(call, items)
        return

    def call_with_stop(item: Any) -> Any:
        if check is None:
            return call(item)
        with cancellable(check):
            return call(item)

    limit_arenas()  # else each worker thread gets malloc arenas of its own: corpus RSS +14% from 1k to 10k rows
    before = torch.get_num_threads()
    executor = ThreadPoolExecutor(workers, initializer=torch.set_num_threads, initargs=(1,))
    try:
        yield executor.map(call_with_stop, items)
    finally:
        executor.shutdown(cancel_futures=True)
        torch.set_num_threads(before)


class _RayWorker:
    """Ray actor: makes its function once (one torch thread), then applies it to one item per call."""

    def __init__(self, make: Maker) -> None:
        torch.set_num_threads(1)
        self.fn = make()

    def run(self, item: Any) -> Any:
        return self.fn(item)


@contextmanager
def _ray(make: Maker, items: Sequence[Any], workers: int, address: str | None) -> Iterator[Iterator[Any]]:
    ray = require("ray", "ray")
    if not ray.is_initialized():
        ray.init(address=address, include_dashboard=False)
    actor = ray.remote(num_cpus=1)(_RayWorker)
    pool = [actor.remote(make) for _ in range(min(workers, max(len(items), 1)))]
    try:
        yield _ray_results(ray, pool, list(items))
    finally:
        for worker in pool:
            ray.kill(worker)


def _ray_results(ray: Any, pool: list[Any], items: list[Any]) -> Iterator[Any]:
    """Each item sent to a free actor as soon as one is free (at most RAY_QUEUED per actor, and never more than
    RAY_QUEUED items per actor ahead of the next result handed out), results in input order."""
    free = deque(worker for _ in range(RAY_QUEUED) for worker in pool)
    window = RAY_QUEUED * len(pool)
    pending: dict[Any, tuple[int, Any]] = {}
    finished: dict[int, Any] = {}
    sent = handed = 0
    while handed < len(items):
        while free and sent < len(items) and sent - handed < window:
            worker = free.popleft()
            pending[worker.run.remote(items[sent])] = (sent, worker)
            sent += 1
        if handed not in finished:
            ready, _ = ray.wait(list(pending), num_returns=1, timeout=RAY_POLL_SECONDS)
            checkpoint()  # a stop is seen within RAY_POLL_SECONDS, not after the item
            for ref in ready:
                index, worker = pending.pop(ref)
                finished[index] = ray.get(ref)
                free.append(worker)
            continue
        yield finished.pop(handed)
        handed += 1
