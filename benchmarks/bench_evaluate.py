"""Evaluation cost, side by side in one run (issue 17).

(a) one generated shape on default-image with rollout, attention and gradient, in units of "explanations of it"
    (the mean time of explaining it with those three methods, measured before and after the evaluations, so a load
    that changes during the run moves both sides; target: at most 50), for the default protocol (gradient x input
    reference, one random ordering) and what each protocol change saves: the old protocol (integrated gradients too,
    3 random orderings) and each change alone; with where the default run's time went;
(b) 100 generated sentences on default-text with every method and --no-agreement, as the command
    `python -m rollout_core evaluate` in its own process with 2 torch threads (OMP_NUM_THREADS=2), examples on 2
    threads of one torch thread each (the default) and one at a time on torch's 2 threads (--workers 1); target
    under 2 minutes on 2 cores. Wall and CPU seconds (CPU: all threads of the process).

Run: python benchmarks/bench_evaluate.py [--sentences 100] [--quick]
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


PROTOCOLS = (("default: gradient x input reference, 1 random ordering", ("gxi",), 1),
             ("old: + integrated gradients, 3 random orderings", ("gxi", "ig"), 3),
             ("integrated gradients only when asked, 3 orderings", ("gxi",), 3),
             ("1 random ordering, integrated gradients kept", ("gxi", "ig"), 1))


def image_case() -> None:
    from rollout_core.data import shapes
    from rollout_core.explain import explain_image
    from rollout_core.faithfulness.evaluate import evaluate_input
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
    runs = {}
    for name, references, seeds in PROTOCOLS:
        progress = clock if name.startswith("default") else None
        runs[name] = _seconds(lambda r=references, s=seeds, p=progress: evaluate_input(
            image, shape, three, references=r, seeds=s, progress=p))
        if progress is not None:
            clock.close()  # the last stage (scoring) ends with the run
    after = unit()
    wall, cpu = (before[0] + after[0]) / 2, (before[1] + after[1]) / 2
    print(f"(a) default-image, one generated shape, {', '.join(three)}; one explanation of it: {wall:.2f} s wall "
          f"({before[0]:.2f} before, {after[0]:.2f} after), {cpu:.2f} s CPU; load average {os.getloadavg()[0]:.1f}",
          flush=True)
    for name, (took, took_cpu) in runs.items():
        print(f"  {name:52s} {took:7.1f} s = {took / wall:6.1f} explanations (target <= 50); "
              f"CPU {took_cpu:7.1f} s = {took_cpu / cpu:6.1f} explanations", flush=True)
    print("  default run by stage (wall): " + ", ".join(
        f"{name} {seconds:.1f} s = {seconds / wall:.1f} explanations" for name, seconds in clock.seconds.items()))


def text_case(sentences: int, methods: list[str]) -> None:
    import resource
    import subprocess
    import sys

    command = [sys.executable, "-m", "rollout_core", "evaluate", "--model", "default-text", "--dataset", "text",
               "--limit", str(sentences), "--methods", *methods, "--no-agreement", "--out", "/tmp/bench-evaluate"]
    print(f"(b) default-text, {sentences} generated sentences, {len(methods)} methods: {' '.join(command[1:])}")
    env = {**os.environ, "OMP_NUM_THREADS": "2"}
    for name, extra in (("2 threads of one torch thread (default)", []),
                        ("one at a time, 2 torch threads", ["--workers", "1"])):
        children = resource.getrusage(resource.RUSAGE_CHILDREN)
        load, wall = os.getloadavg()[0], time.perf_counter()
        subprocess.run(command + extra, env=env, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wall = time.perf_counter() - wall
        used = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu = used.ru_utime + used.ru_stime - children.ru_utime - children.ru_stime
        hundred = wall * 100 / sentences
        print(f"  {name:40s} {wall:7.1f} s wall (CPU {cpu:7.1f} s; load average {load:.1f} -> "
              f"{os.getloadavg()[0]:.1f}); 100 sentences {'' if sentences == 100 else '~'}{hundred:6.1f} s "
              "(target < 120 s)", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sentences", type=int, default=100, help="generated sentences in (b)")
    parser.add_argument("--skip-image", action="store_true", help="only (b)")
    parser.add_argument("--quick", action="store_true", help="5 sentences")
    args = parser.parse_args()
    sentences = 5 if args.quick else args.sentences
    if sentences < 1:
        parser.error("--sentences must be >= 1")
    print(f"torch threads {torch.get_num_threads()}, load average {os.getloadavg()[0]:.1f} at start")
    from rollout_core.faithfulness.evaluate import METHODS, REFERENCES

    if not args.skip_image:
        image_case()
    text_case(sentences, [*METHODS, *REFERENCES])
    print(f"load average {os.getloadavg()[0]:.1f} at the end")


if __name__ == "__main__":
    main()
