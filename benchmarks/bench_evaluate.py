"""Evaluation cost, side by side in one run (issue 17).

(a) one generated shape on default-image with rollout, attention and gradient, in units of "explanations of it"
    (the mean time of explaining it with those three methods, measured before and after the evaluations, so a load
    that changes during the run moves both sides; target: at most 50), for the default protocol (gradient x input
    reference, one random ordering) and what each protocol change saves: the old protocol (integrated gradients too,
    3 random orderings) and each change alone; with where the default run's time went;
(b) 100 generated sentences on default-text with every method that runs on it and --no-agreement, as the command
    `python -m rollout_core evaluate` in its own process with 2 torch threads (OMP_NUM_THREADS=2), examples on 2
    threads of one torch thread each (the default) and one at a time on torch's 2 threads (--workers 1); target
    under 2 minutes on 2 cores. Wall and CPU seconds (CPU: all threads of the process).

(c) one input as a user gets it (issue 29: a sentence with 3 methods <= 15 explanations' worth, an image <= 20):
    `evaluate_input` with the page's methods (the model's measured default, rollout, raw attention) on one sentence
    of default-text and one generated shape of default-image, beside one explanation of it (the mean over the three
    methods), interleaved runs, medians of wall and of CPU seconds (CPU: less moved by other processes on a shared
    machine); the default protocol (no reference, 1 random ordering), as the Evaluate page runs it (its own
    explanation given, a progress callback, so passes of at most 16 perturbed inputs), and what asking for more
    costs (gradient x input, integrated
    gradients, 3 orderings) or what each grid costs (the default: text tenths, images quarters). Torch threads: as
    the process has them (set OMP_NUM_THREADS).

Run: python benchmarks/bench_evaluate.py [--sentences 100] [--quick] [--single-only] [--repeats 5]
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


SINGLE_PROTOCOLS = (("default (no reference, 1 random ordering)", {}),
                    ("default as the page runs it (its explanation given)", {"page": True}),
                    ("+ gradient x input", {"references": ("gxi",)}),
                    ("+ both references (before: text's default)", {"references": ("gxi", "ig")}),
                    ("+ 3 random orderings", {"seeds": 3}),
                    ("grid tenths (the full protocol)", {"grid": "tenths"}),
                    ("grid fifths", {"grid": "fifths"}),
                    ("grid quarters", {"grid": "quarters"}))


def single_case(modality: str, repeats: int) -> None:
    """(c): evaluation / one explanation on one input, both measured in this run, interleaved, medians."""
    import statistics

    from rollout_core import methods as registry
    from rollout_core.data import shapes
    from rollout_core.explain import explain_image, explain_text
    from rollout_core.faithfulness.evaluate import evaluate_input
    from rollout_core.models.loading import load_model
    from rollout_core.models.measured import default_method

    handle = load_model(f"default-{modality}")
    source = ("The food was great but the service was terrible." if modality == "text"
              else shapes.generate(1, split="test")[0].image)
    explain = explain_text if modality == "text" else explain_image
    three = list(dict.fromkeys((default_method(handle.name, [s.name for s in registry.runnable(handle)]),
                                "rollout", "attention")))

    from rollout_core.inputs.continuous import prepare_image, prepare_text

    prepared = (prepare_text if modality == "text" else prepare_image)(handle, source)
    masks = torch.rand(16, prepared.n, generator=torch.Generator().manual_seed(0)) < 0.5
    times: dict[str, list[float]] = {}
    cpus: dict[str, list[float]] = {}

    def timed(name: str, fn: Callable[[], object]) -> None:
        wall, cpu = _seconds(fn)
        times.setdefault(name, []).append(wall)
        cpus.setdefault(name, []).append(cpu)

    for m in three:  # warm-up: kernels, the scoring copy of the model
        explain(handle, source, method=m)
    default = evaluate_input(handle, source, three)
    for _ in range(repeats):
        for m in three:
            timed(m, lambda m=m: explain(handle, source, method=m))
        timed("row", lambda: prepared.probabilities(masks))
        for name, kwargs in SINGLE_PROTOCOLS:
            if kwargs.get("page"):  # the page made it before the run (its prediction), so it is not timed
                given = {three[0]: explain(handle, source, method=three[0])}
                timed(name, lambda g=given: evaluate_input(handle, source, three, explanations=g,
                                                           progress=lambda done, total, what: None))
            else:
                timed(name, lambda k=kwargs: evaluate_input(handle, source, three, **k))
    estimates = [time_left_ratios(handle, source, three) for _ in range(max(1, repeats // 2))]
    med = {k: statistics.median(v) for k, v in times.items()}
    med["row"] /= len(masks)
    med_cpu = {k: statistics.median(v) for k, v in cpus.items()}
    unit = sum(med[m] for m in three) / len(three)
    unit_cpu = sum(med_cpu[m] for m in three) / len(three)
    target = 15 if modality == "text" else 20
    print(f"(c) default-{modality}, one {'sentence' if modality == 'text' else 'generated shape'}, "
          f"{', '.join(three)}; torch threads {torch.get_num_threads()}, {repeats} interleaved repeats, medians; "
          f"load average {os.getloadavg()[0]:.1f}", flush=True)
    print("  one explanation: " + ", ".join(f"{m} {med[m] * 1000:.0f} ms" for m in three)
          + f"; unit (their mean) {unit * 1000:.0f} ms, CPU {unit_cpu * 1000:.0f} ms; a scored row in a pass of 16: "
          f"{med['row'] * 1000:.1f} ms = {med['row'] / unit:.2f} explanations ({prepared.n} positions); the default "
          f"run: grid {default.grid}, {default.scored} perturbed inputs in {default.passes} passes")
    for name, _ in SINGLE_PROTOCOLS:
        print(f"  {name:52s} {med[name]:7.3f} s = {med[name] / unit:6.1f} explanations; CPU {med_cpu[name]:7.3f} s = "
              f"{med_cpu[name] / unit_cpu:6.1f}{f' (target <= {target})' if name.startswith('default') else ''}",
              flush=True)
    low, high = min(e[0] for e in estimates), max(e[1] for e in estimates)
    print(f"  time left shown / time it then took, every progress report of the default run ({len(estimates)} runs, "
          f"reports with at least 10% of the run left): {low:.2f} .. {high:.2f} (target within 0.5 .. 2)", flush=True)


def time_left_ratios(handle: object, source: object, methods: list[str]) -> tuple[float, float]:
    """(lowest, highest) ratio of the time left a progress report implies (total - done, milliseconds of work) to
    the time the run then took, over the reports made with at least 10% of the run still to go."""
    from rollout_core.faithfulness.evaluate import evaluate_input

    reports: list[tuple[float, int, int]] = []
    start = time.perf_counter()
    evaluate_input(handle, source, methods, progress=lambda d, t, w: reports.append((time.perf_counter(), d, t)))
    end = time.perf_counter()
    ratios = [((t - d) / 1000) / (end - at) for at, d, t in reports if t > 0 and end - at > 0.1 * (end - start)]
    return (min(ratios), max(ratios)) if ratios else (float("nan"), float("nan"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sentences", type=int, default=100, help="generated sentences in (b)")
    parser.add_argument("--skip-image", action="store_true", help="only (b)")
    parser.add_argument("--quick", action="store_true", help="5 sentences")
    parser.add_argument("--single-only", action="store_true", help="only (c)")
    parser.add_argument("--repeats", type=int, default=5, help="interleaved repeats in (c)")
    args = parser.parse_args()
    sentences = 5 if args.quick else args.sentences
    if sentences < 1:
        parser.error("--sentences must be >= 1")
    print(f"torch threads {torch.get_num_threads()}, load average {os.getloadavg()[0]:.1f} at start")
    from rollout_core.faithfulness.evaluate import METHODS, REFERENCES

    for modality in ("text", "image"):
        single_case(modality, args.repeats if modality == "text" else max(1, args.repeats // 2))
    if args.single_only:
        return
    if not args.skip_image:
        image_case()
    from rollout_core import methods as registry
    from rollout_core.models.loading import load_model

    runs = {s.name for s in registry.runnable(load_model("default-text"))}  # alti_tuned is refused there
    text_case(sentences, [m for m in (*METHODS, *REFERENCES) if m in runs])
    print(f"load average {os.getloadavg()[0]:.1f} at the end")


if __name__ == "__main__":
    main()
