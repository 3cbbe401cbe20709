"""A thread-safe least-recently-used cache bounded by the bytes of what it holds, not by a count.

One explanation of a 512-token text with every head kept is about 158 MB, a short sentence's a few KB, so a
count bound is either useless or wasteful: the server's pages keep explanations, layer-view payloads and
evaluations in one `ByteCache` of env `ROLLOUT_RESULT_CACHE_MB` megabytes (default 2048). Sizes are
measured from the values (`size_of`: arrays by their buffers, containers by their contents).

Freed buffers go back to the system: glibc's malloc raises its mmap threshold after each large free, so later
arrays land in heap arenas that evictions leave fragmented (a 50-text load test: 440 MB handed back by one
`malloc_trim`). `rollout_core.malloc.limit_heap_growth` pins the threshold at 1 MiB, and an eviction of
`TRIM_BYTES` or more trims.
"""
from __future__ import annotations

import dataclasses
import sys
import threading
from collections import OrderedDict
from typing import Any, Callable, Hashable

from rollout_core.malloc import release_freed_memory
from rollout_core.settings_env import env_number

DEFAULT_CACHE_MB = 2048
TRIM_BYTES = 32 * 2**20


def max_cache_bytes() -> int:
    """The bound of the pages' result cache: env ROLLOUT_RESULT_CACHE_MB (default 2048, above 0) in bytes."""
    return int(env_number("ROLLOUT_RESULT_CACHE_MB", DEFAULT_CACHE_MB, minimum=0, inclusive=False) * 2**20)


def size_of(value: Any) -> int:
    """Bytes held by `value`: numpy arrays and torch tensors by their buffers, DataFrames by their deep memory,
    strings and bytes by their length, dicts, sequences and dataclasses by their contents (each object once)."""
    seen: set[int] = set()

    def walk(item: Any) -> int:
        if id(item) in seen:
            return 0
        seen.add(id(item))
        if isinstance(item, (str, bytes, bytearray)):
            return len(item)
        if hasattr(item, "memory_usage") and hasattr(item, "columns"):  # a pandas DataFrame
            return int(item.memory_usage(deep=True).sum())
        if isinstance(getattr(item, "nbytes", None), int):  # numpy array, torch tensor
            return int(item.nbytes)
        if isinstance(item, dict):
            return sys.getsizeof(item) + sum(walk(k) + walk(v) for k, v in item.items())
        if isinstance(item, (list, tuple, set, frozenset)):
            return sys.getsizeof(item) + sum(walk(v) for v in item)
        if dataclasses.is_dataclass(item) and not isinstance(item, type):
            return sum(walk(getattr(item, f.name)) for f in dataclasses.fields(item))
        return sys.getsizeof(item)

    return walk(value)


class ByteCache:
    """`get_or_compute(key, compute)`: the cached value of `key`, or `compute()` stored under it.

    After each store the least recently used values are dropped until the total is at most `max_bytes()`; a
    value larger than the whole bound is returned but not kept. Concurrent requests for one key compute once."""

    def __init__(self, max_bytes: Callable[[], int] = max_cache_bytes, size: Callable[[Any], int] = size_of) -> None:
        self._max_bytes = max_bytes
        self._size = size
        self._lock = threading.Lock()
        self._items: OrderedDict[Hashable, tuple[Any, int]] = OrderedDict()
        self._key_locks: dict[Hashable, threading.Lock] = {}
        self._total = 0

    def get_or_compute(self, key: Hashable, compute: Callable[[], Any]) -> Any:
        found, value = self._get(key)
        if found:
            return value
        with self._lock:
            key_lock = self._key_locks.setdefault(key, threading.Lock())
        try:
            with key_lock:
                found, value = self._get(key)  # another thread computed it while we waited
                if not found:
                    value = compute()
                    self._put(key, value, self._size(value))
        finally:
            with self._lock:
                self._key_locks.pop(key, None)
        return value

    def _get(self, key: Hashable) -> tuple[bool, Any]:
        with self._lock:
            if key not in self._items:
                return False, None
            self._items.move_to_end(key)
            return True, self._items[key][0]

    def _put(self, key: Hashable, value: Any, nbytes: int) -> None:
        bound = self._max_bytes()
        evicted = 0
        with self._lock:
            if nbytes > bound:
                return
            self._items[key] = (value, nbytes)
            self._total += nbytes
            while self._total > bound:
                _, (_, dropped) = self._items.popitem(last=False)
                self._total -= dropped
                evicted += dropped
        if evicted >= TRIM_BYTES:
            release_freed_memory()

    @property
    def total_bytes(self) -> int:
        """Bytes held now (at most the bound)."""
        with self._lock:
            return self._total

    def keys(self) -> list[Hashable]:
        """Keys from least to most recently used."""
        with self._lock:
            return list(self._items)

    def clear(self) -> None:
        with self._lock:
            self._items.clear()
            self._total = 0
