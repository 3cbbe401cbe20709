"""`LRUCache`: the one thread-safe least-recently-used cache, bounded by a count, by bytes, or both.

Used for loaded model handles (a count: `ROLLOUT_MODEL_CACHE_SIZE`), the pages' results (bytes:
`ROLLOUT_RESULT_CACHE_MB`) and uploads (both). Bounds are functions read at every store, so a setting changed
while the process runs takes effect at the next store. Concurrent `get_or_compute` calls for one key compute once.
Sizes are measured from the values (`size_of`: arrays by their buffers, containers by their contents).
"""
from __future__ import annotations

import dataclasses
import sys
import threading
from collections import OrderedDict
from typing import Any, Callable, Hashable

Bound = Callable[[], int]


def size_of(value: Any) -> int:
    """Bytes held by `value`: numpy arrays and torch tensors by their buffers, DataFrames by their deep memory,
    strings and bytes by their length, dicts, sequences and dataclasses by their contents (each object once; a
    value not computed yet by the `nbytes` it will hold)."""
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
            return sum(walk(_stored(item, f.name)) for f in dataclasses.fields(item))
        return sys.getsizeof(item)

    return walk(value)


def _stored(item: Any, name: str) -> Any:
    """Attribute `name` of `item` as stored, without running a property over it: a deferred field (an Explanation's
    `matrix`) is then counted by its `nbytes`, not computed to be measured."""
    found = getattr(item, "__dict__", {})
    return found[name] if name in found else getattr(item, name)


class LRUCache:
    """Values by key; after each store the least recently used go until at most `max_items()` values and
    `max_bytes()` bytes (by `size`) are held (a bound left None does not apply). A value larger than the whole
    byte bound is returned but not kept. `on_evict(nbytes)` is told the bytes each store evicted (when any)."""

    def __init__(self, *, max_items: Bound | None = None, max_bytes: Bound | None = None,
                 size: Callable[[Any], int] = size_of, on_evict: Callable[[int], None] | None = None) -> None:
        self._max_items, self._max_bytes = max_items, max_bytes
        self._size = size if max_bytes is not None else (lambda value: 0)
        self._on_evict = on_evict
        self._lock = threading.Lock()
        self._items: OrderedDict[Hashable, tuple[Any, int]] = OrderedDict()
        self._key_locks: dict[Hashable, threading.Lock] = {}
        self._total = 0

    def get(self, key: Hashable, default: Any = None) -> Any:
        """The value of `key` (now the most recently used), or `default`."""
        found, value = self._get(key)
        return value if found else default

    def peek(self, key: Hashable, default: Any = None) -> Any:
        """The value of `key`, or `default`, leaving the order of use as it is."""
        with self._lock:
            return self._items[key][0] if key in self._items else default

    def put(self, key: Hashable, value: Any, *, evict_first: Callable[[Any], bool] | None = None) -> bool:
        """Store `value` under `key` as the most recently used; False when it is larger than the byte bound (then
        not kept, and an older value of `key` is dropped). `evict_first(value)`: the values to evict before any
        other when room is needed, least recently used first (a store's own earlier values, say)."""
        nbytes = self._size(value)
        bound = None if self._max_bytes is None else self._max_bytes()
        evicted = 0
        with self._lock:
            if key in self._items:
                self._total -= self._items.pop(key)[1]
            if bound is not None and nbytes > bound:
                return False
            self._items[key] = (value, nbytes)
            self._total += nbytes
            limit = None if self._max_items is None else max(1, self._max_items())

            def over() -> bool:
                return (limit is not None and len(self._items) > limit) or (bound is not None and self._total > bound)

            if evict_first is not None and over():
                for victim in [k for k, (v, _) in self._items.items() if k != key and evict_first(v)]:
                    if not over():
                        break
                    dropped = self._items.pop(victim)[1]
                    self._total -= dropped
                    evicted += dropped
            while over():
                _, (_, dropped) = self._items.popitem(last=False)
                self._total -= dropped
                evicted += dropped
        if evicted and self._on_evict is not None:
            self._on_evict(evicted)
        return True

    def get_or_compute(self, key: Hashable, compute: Callable[[], Any]) -> Any:
        """The cached value of `key`, or `compute()` stored under it; concurrent calls for one key compute once
        (the others wait and take its value)."""
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
                    self.put(key, value)
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

    @property
    def total_bytes(self) -> int:
        """Bytes held now (0 without a byte bound)."""
        with self._lock:
            return self._total

    def keys(self) -> list[Hashable]:
        """Keys from least to most recently used."""
        with self._lock:
            return list(self._items)

    def __len__(self) -> int:
        with self._lock:
            return len(self._items)

    def clear(self) -> None:
        with self._lock:
            self._items.clear()
            self._total = 0
