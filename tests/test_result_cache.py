"""Issue 16: the pages' results are bounded by bytes, least recently used out first; sizes come from the arrays."""
from __future__ import annotations

import os
import threading
import time

import numpy as np
import pytest

from explanations import make_explanation
from rollout_core.lru import LRUCache, size_of
from rollout_core.serving import malloc
from rollout_core.serving.result_cache import TRIM_BYTES, max_cache_bytes, result_cache

MB = 2**20


def test_filling_past_the_bound_keeps_the_total_under_it_and_drops_the_oldest():
    cache = LRUCache(max_bytes=lambda: 10 * MB)
    for i in range(25):
        cache.get_or_compute(i, lambda: np.zeros(MB, dtype=np.uint8))  # 1 MB each
        assert cache.total_bytes <= 10 * MB
    assert cache.keys() == list(range(15, 25))  # the ten most recent, oldest first
    assert cache.total_bytes == 10 * MB


def test_a_hit_makes_an_entry_recent_and_does_not_compute():
    cache = LRUCache(max_bytes=lambda: 3 * MB)
    calls: list[int] = []

    def make(i: int):
        return lambda: calls.append(i) or np.zeros(MB, dtype=np.uint8)

    first = cache.get_or_compute("a", make(0))
    cache.get_or_compute("b", make(1))
    cache.get_or_compute("c", make(2))
    assert cache.get_or_compute("a", make(9)) is first  # hit: same object, not recomputed
    cache.get_or_compute("d", make(3))  # evicts b, the least recently used
    assert cache.keys() == ["c", "a", "d"] and calls == [0, 1, 2, 3]


def test_a_value_larger_than_the_bound_is_returned_but_not_kept():
    cache = LRUCache(max_bytes=lambda: MB)
    cache.get_or_compute("small", lambda: np.zeros(1000, dtype=np.uint8))
    big = cache.get_or_compute("big", lambda: np.zeros(2 * MB, dtype=np.uint8))
    assert big.nbytes == 2 * MB and cache.keys() == ["small"] and cache.total_bytes == 1000


def test_concurrent_requests_for_one_key_compute_once():
    cache = LRUCache(max_bytes=lambda: MB)
    calls: list[int] = []

    def slow():
        calls.append(1)
        time.sleep(0.2)
        return np.zeros(10)

    threads = [threading.Thread(target=cache.get_or_compute, args=("k", slow)) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert calls == [1]


def test_an_explanation_is_measured_from_its_arrays():
    n, layers, heads = 40, 6, 12
    exp = make_explanation(["ab"] * n, np.zeros(n), layers=layers, matrix=np.zeros((n, n)), target_description="",
                           head_attention=np.zeros((layers, heads, n, n), dtype=np.float32))
    arrays = n + 8 * (n + 2 * layers * n + n * n + layers * n * n) + 4 * layers * heads * n * n
    assert arrays <= size_of(exp) <= arrays + 20_000  # the arrays, plus small change for strings and containers
    assert size_of([exp, exp]) < size_of(exp) + 1000  # the same object twice is counted once
    shared = np.zeros(MB, dtype=np.uint8)
    assert size_of({"a": shared, "b": shared}) < 1.01 * MB


def test_the_bound_comes_from_the_setting(monkeypatch):
    monkeypatch.setenv("ROLLOUT_RESULT_CACHE_MB", "512")
    assert max_cache_bytes() == 512 * MB
    monkeypatch.delenv("ROLLOUT_RESULT_CACHE_MB")
    assert max_cache_bytes() == 2048 * MB


HEAP_CHECK = """
import os
import numpy as np
from rollout_core.serving.malloc import limit_heap_growth
from rollout_core.serving.result_cache import TRIM_BYTES, result_cache


def resident():
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


if not limit_heap_growth():  # as app.py does
    print("skip")
    raise SystemExit
block = 512 * 1024  # under the 1 MiB threshold: heap, not mmap
count = 2 * TRIM_BYTES // block
cache = result_cache(max_bytes=lambda: count * block + 1024)
for i in range(count):
    cache.get_or_compute(i, lambda: np.ones(block, dtype=np.uint8))  # touched: resident
pin = np.ones(block, dtype=np.uint8)  # allocated after them: the heap cannot shrink from the top
before = resident()
cache.get_or_compute("big", lambda: np.zeros(count * block, dtype=np.uint8))  # untouched: evicts all
assert cache.keys() == ["big"] and pin.sum() == block
print(before - resident(), count * block)
"""


def test_a_large_eviction_hands_the_freed_heap_back_to_the_system():
    """Arrays under the pinned mmap threshold live in the heap; freed below a live block they stay resident
    until `malloc_trim`, which the cache calls after evicting TRIM_BYTES or more. Measured in a fresh process:
    the resident size of a long test session moves with whatever else it runs."""
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(root), os.environ.get("PYTHONPATH")])))
    out = subprocess.run([sys.executable, "-c", HEAP_CHECK], capture_output=True, text=True, env=env, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    if out.stdout.strip() == "skip":
        pytest.skip("not glibc: nothing to trim")
    freed, total = map(int, out.stdout.split())
    assert freed >= total // 2  # without the trim the freed arrays stay resident (freed ~ 0)


def test_a_small_eviction_does_not_trim(monkeypatch):
    trims = []
    monkeypatch.setattr(malloc, "release_freed_memory", lambda: trims.append(1))
    cache = result_cache(max_bytes=lambda: TRIM_BYTES, size=lambda value: value)
    cache.get_or_compute("a", lambda: TRIM_BYTES // 2)
    cache.get_or_compute("b", lambda: TRIM_BYTES // 2 + 1)  # evicts "a": half of TRIM_BYTES
    assert trims == []
    cache.get_or_compute("c", lambda: TRIM_BYTES)  # evicts "b": just over half; still under
    assert trims == [] and cache.keys() == ["c"]
    cache.get_or_compute("d", lambda: 1)  # evicts "c": TRIM_BYTES
    assert trims == [1]


def test_the_one_cache_class_bounds_by_count_by_bytes_or_both():
    by_count = LRUCache(max_items=lambda: 2)
    for key in "abc":
        by_count.put(key, np.zeros(MB, dtype=np.uint8))
    assert by_count.keys() == ["b", "c"] and by_count.total_bytes == 0  # no byte bound: sizes are not measured
    both = LRUCache(max_items=lambda: 3, max_bytes=lambda: 10, size=len)
    for key, value in (("a", b"xxxx"), ("b", b"yyyy"), ("c", b"z")):
        assert both.put(key, value)
    assert both.keys() == ["a", "b", "c"] and both.total_bytes == 9
    both.put("d", b"w")  # the count bound: "a" goes
    assert both.keys() == ["b", "c", "d"]
    assert both.peek("b") == b"yyyy" and both.keys() == ["b", "c", "d"]  # peek leaves the order as it is
    assert both.get("b") == b"yyyy" and both.keys() == ["c", "d", "b"]  # get makes it the most recent
    assert not both.put("c", b"q" * 11) and both.keys() == ["d", "b"]  # too large: refused, the old value dropped
