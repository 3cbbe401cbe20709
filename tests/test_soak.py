"""Issue 7, load: 200 explanations in one process without unbounded memory growth, and several threads
sharing the model cache at once (each gets the sequential result; each model is loaded once).

Memory is read as the process's resident set (VmRSS in /proc/self/status) after a warm-up of 20
explanations and after all 200; the bound is generous (allocator noise is several MB), the live-tensor
count is the sensitive check: a per-explanation leak of even one tensor would show as 180 more.
"""
from __future__ import annotations

import gc
import shutil
import threading
import time
import warnings
from pathlib import Path
from typing import Any, Callable

import numpy as np
import pytest
import torch

from rollout_core.explain import explain_image, explain_text
from rollout_core.models import loading
from tiny_models import WORDS

TOTAL, WARM_UP = 200, 20
RSS_BOUND_MB = 50.0
METHODS = ("rollout", "gradient", "attention", "flow")


def rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError("no VmRSS in /proc/self/status")


def live_tensors() -> int:
    gc.collect()
    with warnings.catch_warnings():  # isinstance on some deprecated torch proxies warns
        warnings.simplefilter("ignore")
        return sum(1 for o in gc.get_objects() if isinstance(o, torch.Tensor))


def mixed_texts(count: int, seed: int = 0) -> list[str]:
    """Sentences of 1 to 50 words, some with punctuation, emoji or other scripts."""
    rng = np.random.default_rng(seed)
    extras = ["!", "?", "...", "🙂", "日本語", "<b>", "über"]
    texts = []
    for _ in range(count):
        words = list(rng.choice(WORDS, size=int(rng.integers(1, 51))))
        if rng.random() < 0.3:
            words.insert(int(rng.integers(0, len(words) + 1)), str(rng.choice(extras)))
        texts.append(" ".join(words))
    return texts


def pictures(count: int, seed: int = 0) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [(rng.random((int(rng.integers(20, 80)), int(rng.integers(20, 80)), 3)) * 255).astype(np.uint8)
            for _ in range(count)]


@pytest.mark.slow
def test_soak_200_explanations_memory_is_bounded(tiny_handle: Callable[[str], Any]) -> None:
    text_model, image_model = tiny_handle("bert"), tiny_handle("vit")
    texts, images = mixed_texts(TOTAL), pictures(8)

    def one(i: int) -> Any:
        method = METHODS[i % len(METHODS)]
        if i % 8 == 7:  # one in eight is an image
            return explain_image(image_model, images[(i // 8) % len(images)], method=method)
        return explain_text(text_model, texts[i], method=method, keep_heads=i % 5 == 0)

    start = time.perf_counter()
    first = one(0).scores
    for i in range(1, WARM_UP):
        one(i)
    rss_warm, tensors_warm = rss_mb(), live_tensors()
    for i in range(WARM_UP, TOTAL):
        one(i)
    rss_end, tensors_end = rss_mb(), live_tensors()
    elapsed = time.perf_counter() - start
    print(f"\nsoak: {TOTAL} explanations in {elapsed:.1f} s; RSS after {WARM_UP}: {rss_warm:.1f} MB, "
          f"after {TOTAL}: {rss_end:.1f} MB (growth {rss_end - rss_warm:+.1f} MB); "
          f"live tensors {tensors_warm} -> {tensors_end}")
    assert rss_end - rss_warm < RSS_BOUND_MB
    assert tensors_end - tensors_warm < 20, "explanations leave tensors behind"
    assert np.array_equal(one(0).scores, first)  # and the 201st run of the first input gives the same answer


def test_threads_share_the_model_cache(tiny_model_dir: Callable[[str], Path], tmp_path: Path,
                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """4 threads x 10 explanations on two models named by folder, all starting together through an empty
    cache: every result equals the sequential one, and each model is loaded exactly once."""
    text_folder = shutil.copytree(tiny_model_dir("bert"), tmp_path / "text-model")
    image_folder = shutil.copytree(tiny_model_dir("vit"), tmp_path / "image-model")
    texts, images = mixed_texts(20, seed=1), pictures(4, seed=1)
    jobs = [[(t * 10 + k) for k in range(10)] for t in range(4)]

    def run(j: int) -> np.ndarray:
        method = METHODS[j % len(METHODS)]
        if j % 2:
            return explain_image(str(image_folder), images[j % len(images)], method=method).scores
        return explain_text(str(text_folder), texts[j % len(texts)], method=method).scores

    loading.clear_cache()
    expected = {j: run(j) for job in jobs for j in job}

    loads: list[str] = []
    real_load = loading.load_folder

    def counted(folder: Path, *args: Any, **kwargs: Any) -> Any:
        loads.append(Path(folder).name)
        time.sleep(0.2)  # widen the window in which the other threads ask for the same model
        return real_load(folder, *args, **kwargs)

    monkeypatch.setattr(loading, "load_folder", counted)
    loading.clear_cache()
    barrier = threading.Barrier(len(jobs))
    got: dict[int, np.ndarray] = {}
    errors: list[BaseException] = []

    def worker(mine: list[int]) -> None:
        try:
            barrier.wait()
            for j in mine:
                got[j] = run(j)
        except BaseException as err:  # noqa: BLE001 - reported by the main thread
            errors.append(err)

    threads = [threading.Thread(target=worker, args=(job,)) for job in jobs]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not errors, errors
    assert sorted(loads) == ["image-model", "text-model"]
    assert sorted(got) == sorted(expected)
    assert all(np.array_equal(got[j], expected[j]) for j in expected)
    loading.clear_cache()


def test_lowmem_and_full_captures_on_one_shared_model_at_once(tiny_handle: Callable[[str], Any]) -> None:
    """The low-memory capture points the model's config at its own attention function while it runs;
    other threads using the same model object at that moment (full capture, gradients) must still get
    their sequential results."""
    handle = tiny_handle("bert")
    texts = mixed_texts(40, seed=2)
    modes = [("lowmem", "rollout"), ("full", "rollout"), ("full", "gradient"), ("full", "attention")]

    def run(j: int) -> np.ndarray:
        capture, method = modes[j % len(modes)]
        e = explain_text(handle, texts[j], method=method, capture=capture)
        assert e.settings["capture"] == capture
        return e.scores

    expected = {j: run(j) for j in range(len(texts))}
    got: dict[int, np.ndarray] = {}
    errors: list[BaseException] = []
    barrier = threading.Barrier(4)

    def worker(offset: int) -> None:
        try:
            barrier.wait()
            for j in range(offset, len(texts), 4):  # each thread keeps one mode: the modes overlap in time
                got[j] = run(j)
        except BaseException as err:  # noqa: BLE001 - reported by the main thread
            errors.append(err)

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not errors, errors
    assert all(np.allclose(got[j], expected[j], atol=1e-6) for j in expected), \
        [j for j in expected if not np.allclose(got[j], expected[j], atol=1e-6)]
