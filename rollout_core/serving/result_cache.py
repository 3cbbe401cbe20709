"""The pages' result cache: one `LRUCache` bounded by the bytes of what it holds, not by a count.

One explanation of a 512-token text with every head kept is about 158 MB, a short sentence's a few KB, so a
count bound is either useless or wasteful: the server's pages keep explanations, layer-view payloads and
evaluations in one cache of env `ROLLOUT_RESULT_CACHE_MB` megabytes (default 2048), sized by
`rollout_core.lru.size_of`.

Freed buffers go back to the system: glibc's malloc raises its mmap threshold after each large free, so later
arrays land in heap arenas that evictions leave fragmented (a 50-text load test: 440 MB handed back by one
`malloc_trim`). `rollout_core.serving.malloc.limit_heap_growth` pins the threshold at 1 MiB, and an eviction of
`TRIM_BYTES` or more trims.
"""
from __future__ import annotations

from typing import Any, Callable

from rollout_core import settings
from rollout_core.lru import LRUCache, size_of
from rollout_core.serving import malloc

TRIM_BYTES = 32 * 2**20


def max_cache_bytes() -> int:
    """The bound of the pages' result cache: env ROLLOUT_RESULT_CACHE_MB (default 2048, above 0) in bytes."""
    return int(settings.number("ROLLOUT_RESULT_CACHE_MB") * 2**20)


def _trim_after(evicted: int) -> None:
    if evicted >= TRIM_BYTES:
        malloc.release_freed_memory()


def result_cache(max_bytes: Callable[[], int] = max_cache_bytes, size: Callable[[Any], int] = size_of) -> LRUCache:
    """A byte-bounded `LRUCache` that hands freed heap back to the system after an eviction of `TRIM_BYTES` or
    more (default bound: `max_cache_bytes`)."""
    return LRUCache(max_bytes=max_bytes, size=size, on_evict=_trim_after)
