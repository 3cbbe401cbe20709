"""Whole items spread over threads of one torch thread each (the corpus batches, the evaluation's examples).

Why: splitting every small matrix product of one item over the cores wastes about half the CPU on synchronisation
(OpenMP threads spin while they wait, and far more when other jobs share the cores); whole items per core do not.
"""
from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from typing import Any, Callable, Iterable, Iterator

import torch

from rollout_core import budget
from rollout_core.malloc import limit_arenas


@contextmanager
def thread_map(workers: int) -> Iterator[Callable[[Callable[[Any], Any], Iterable[Any]], Iterator[Any]]]:
    """`map` over `workers` threads of one torch thread each (torch's thread count restored after), results in
    input order; the plain `map` for one. A stop asked of the calling thread (`budget.cancellable`) stops the
    threads at their next `checkpoint()` too."""
    if workers <= 1:
        yield map
        return
    limit_arenas()  # else each worker thread gets malloc arenas of its own: corpus RSS +14% from 1k to 10k rows
    check = budget.stop_check()
    before = torch.get_num_threads()
    pool = ThreadPoolExecutor(workers, initializer=torch.set_num_threads, initargs=(1,))

    def call(fn: Callable[[Any], Any], item: Any) -> Any:
        if check is None:
            return fn(item)
        with budget.cancellable(check):
            return fn(item)

    try:
        yield lambda fn, items: pool.map(lambda item: call(fn, item), items)
    finally:
        pool.shutdown(cancel_futures=True)
        torch.set_num_threads(before)
