"""Issue 16: the pages' results are bounded by bytes, least recently used out first; sizes come from the arrays."""
from __future__ import annotations

import threading
import time

import numpy as np

from rollout_core.explanation import Explanation
from rollout_core.result_cache import ByteCache, max_cache_bytes, size_of

MB = 2**20


def test_filling_past_the_bound_keeps_the_total_under_it_and_drops_the_oldest():
    cache = ByteCache(max_bytes=lambda: 10 * MB)
    for i in range(25):
        cache.get_or_compute(i, lambda: np.zeros(MB, dtype=np.uint8))  # 1 MB each
        assert cache.total_bytes <= 10 * MB
    assert cache.keys() == list(range(15, 25))  # the ten most recent, oldest first
    assert cache.total_bytes == 10 * MB


def test_a_hit_makes_an_entry_recent_and_does_not_compute():
    cache = ByteCache(max_bytes=lambda: 3 * MB)
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
    cache = ByteCache(max_bytes=lambda: MB)
    cache.get_or_compute("small", lambda: np.zeros(1000, dtype=np.uint8))
    big = cache.get_or_compute("big", lambda: np.zeros(2 * MB, dtype=np.uint8))
    assert big.nbytes == 2 * MB and cache.keys() == ["small"] and cache.total_bytes == 1000


def test_concurrent_requests_for_one_key_compute_once():
    cache = ByteCache(max_bytes=lambda: MB)
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
    exp = Explanation(
        kind="text", method="rollout", model_name="m", tokens=["ab"] * n, special=np.zeros(n, dtype=bool),
        scores=np.zeros(n), layer_scores=np.zeros((layers, n)), layer_attention_scores=np.zeros((layers, n)),
        matrix=np.zeros((n, n)), layer_attention=np.zeros((layers, n, n)), settings={}, target_description="",
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
