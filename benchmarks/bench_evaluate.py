"""Evaluation cost, side by side in one run: per-input forwards (batch_size=1, the model as loaded) vs batched.

(a) one generated shape on default-image with rollout, attention and gradient, in units of "explanations of it"
    (the mean time of explaining it with those three methods, measured before and after the evaluations, so a load
    that changes during the run moves both sides; issue 17 target: at most 50), with where the batched run's time
    went (explanations, the gradient x input and integrated-gradient references, scoring the perturbed inputs);
(b) N generated sentences on default-text with every method (issue 17 target: 100 in under 2 minutes on 2 cores;
    the time for 100 is extrapolated from N when N < 100).
Wall and CPU seconds (CPU: all threads of this process, which a shared machine's load inflates much less).

Run: python benchmarks/bench_evaluate.py [--sentences 20] [--quick]
"""
from __future__ import annotations

import argparse
import os
import time
from typing import Callable

import torch

STAGES = (("explaining", "explanations"), ("gradient × input", "references"), ("integrated", "references"),
          ("scoring", "scoring"))


def _seconds(fn: Callable[[], object]) -> tuple[float, float]:
    """(wall, CPU) seconds of fn()."""
    wall, cpu = time.perf_counter(), time.process_time()
    fn()
    return time.perf_counter() - wall, time.process_time() - cpu


class StageClock:
    """An evaluate_input progress callback that adds the wall time between reports to the stage being reported."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}
        self.stage, self.since = "explanations", time.perf_counter()

    def __call__(self, done: int, total: int, what: str) -> None:
        self.close()
        self.stage = next((name for prefix, name in STAGES if what.startswith(prefix)), self.stage)

    def close(self) -> None:
        now = time.perf_counter()
        self.seconds[self.stage] = self.seconds.get(self.stage, 0.0) + now - self.since
        self.since = now


def image_case() -> None:
    from rollout_core.data import shapes
    from rollout_core.explain import explain_image
    from rollout_core.faithfulness.evaluate import evaluate_input
    from rollout_core.faithfulness.scoring import MAX_BATCH
    from rollout_core.models.loading import load_model

    image = load_model("default-image")
    shape = shapes.generate(1, split="test")[0].image
    three = ("rollout", "attention", "gradient")

    def unit() -> tuple[float, float]:
        times = [_seconds(lambda m=method: explain_image(image, shape, method=m)) for method in three]
        return sum(w for w, _ in times) / len(three), sum(c for _, c in times) / len(three)

    unit()  # warm-up
    before = unit()
    clock = StageClock()

    def batched() -> None:
        evaluate_input(image, shape, three, progress=clock)
        clock.close()  # the last stage (scoring) ends with the run

    runs = {MAX_BATCH: _seconds(batched), 1: _seconds(lambda: evaluate_input(image, shape, three, batch_size=1))}
    after = unit()
    wall, cpu = (before[0] + after[0]) / 2, (before[1] + after[1]) / 2
    print(f"(a) default-image, one generated shape, {', '.join(three)}; one explanation of it: {wall:.2f} s wall "
          f"({before[0]:.2f} before, {after[0]:.2f} after), {cpu:.2f} s CPU", flush=True)
    names = {MAX_BATCH: f"batched (batch_size={MAX_BATCH})", 1: "per-input forwards (batch_size=1)"}
    for size, (took, took_cpu) in runs.items():
        print(f"  {names[size]:36s} {took:7.1f} s = {took / wall:6.1f} explanations (target <= 50); "
              f"CPU {took_cpu:7.1f} s = {took_cpu / cpu:6.1f} explanations", flush=True)
    print("  batched run by stage (wall): " + ", ".join(
        f"{name} {seconds:.1f} s = {seconds / wall:.1f} explanations" for name, seconds in clock.seconds.items()))


def text_case(sentences: int) -> None:
    from rollout_core.faithfulness.evaluate import METHODS, evaluate_dataset
    from rollout_core.faithfulness.scoring import MAX_BATCH
    from rollout_core.models.loading import load_model

    text = load_model("default-text")
    evaluate_dataset(text, "text", ("rollout",), limit=1)  # warm-up
    print(f"(b) default-text, {sentences} generated sentences, all {len(METHODS)} methods + random + references")
    times = {}
    for name, size in ((f"batched (batch_size={MAX_BATCH})", MAX_BATCH), ("per-input forwards (batch_size=1)", 1)):
        times[size], cpu = _seconds(lambda s=size: evaluate_dataset(text, "text", METHODS, limit=sentences,
                                                                    batch_size=s))
        hundred = times[size] * 100 / sentences
        print(f"  {name:36s} {times[size]:7.1f} s (CPU {cpu:7.1f} s); 100 sentences "
              f"{'' if sentences == 100 else '~'}{hundred:6.1f} s (target < 120 s)", flush=True)
    print(f"  batched / per-input: {times[MAX_BATCH] / times[1]:.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sentences", type=int, default=20, help="generated sentences in (b)")
    parser.add_argument("--quick", action="store_true", help="5 sentences")
    args = parser.parse_args()
    sentences = 5 if args.quick else args.sentences
    if sentences < 1:
        parser.error("--sentences must be >= 1")
    print(f"torch threads {torch.get_num_threads()}, load average {os.getloadavg()[0]:.1f} at start")
    image_case()
    text_case(sentences)
    print(f"load average {os.getloadavg()[0]:.1f} at the end")


if __name__ == "__main__":
    main()
