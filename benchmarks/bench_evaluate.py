"""Evaluation cost, side by side in one run: per-input forwards (batch_size=1, the model as loaded) vs batched.

(a) one generated shape on default-image with rollout, attention and gradient, in units of "explanations of it"
    (the mean time of explaining it with those three methods; issue 17 target: at most 50);
(b) N generated sentences on default-text with every method (issue 17 target: 100 in under 2 minutes on 2 cores;
    the time for 100 is extrapolated from N when N < 100).

Run: python benchmarks/bench_evaluate.py [--sentences 20] [--quick]
"""
from __future__ import annotations

import argparse
import os
import time

import torch


def _seconds(fn) -> float:  # noqa: ANN001 - any callable
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sentences", type=int, default=20, help="generated sentences in (b)")
    parser.add_argument("--quick", action="store_true", help="5 sentences")
    args = parser.parse_args()
    sentences = 5 if args.quick else args.sentences
    if sentences < 1:
        parser.error("--sentences must be >= 1")

    from rollout_core.data import shapes
    from rollout_core.explain import explain_image
    from rollout_core.faithfulness.evaluate import METHODS, evaluate_dataset, evaluate_input
    from rollout_core.faithfulness.scoring import MAX_BATCH
    from rollout_core.models.loading import load_model

    print(f"torch threads {torch.get_num_threads()}, load average {os.getloadavg()[0]:.1f} at start")
    image = load_model("default-image")
    shape = shapes.generate(1, split="test")[0].image
    three = ("rollout", "attention", "gradient")
    for method in three:  # warm-up
        explain_image(image, shape, method=method)
    unit = sum(_seconds(lambda m=method: explain_image(image, shape, method=m)) for method in three) / len(three)
    print(f"(a) default-image, one generated shape, {', '.join(three)}; one explanation of it: {unit:.2f} s",
          flush=True)
    for name, size in ((f"batched (batch_size={MAX_BATCH})", MAX_BATCH), ("per-input forwards (batch_size=1)", 1)):
        took = _seconds(lambda s=size: evaluate_input(image, shape, three, batch_size=s))
        print(f"  {name:36s} {took:7.1f} s = {took / unit:6.1f} explanations (target <= 50)", flush=True)

    text = load_model("default-text")
    evaluate_dataset(text, "text", ("rollout",), limit=1)  # warm-up
    print(f"(b) default-text, {sentences} generated sentences, all {len(METHODS)} methods + random + references")
    times = {}
    for name, size in ((f"batched (batch_size={MAX_BATCH})", MAX_BATCH), ("per-input forwards (batch_size=1)", 1)):
        times[size] = _seconds(lambda s=size: evaluate_dataset(text, "text", METHODS, limit=sentences, batch_size=s))
        hundred = times[size] * 100 / sentences
        print(f"  {name:36s} {times[size]:7.1f} s; 100 sentences {'' if sentences == 100 else '~'}{hundred:6.1f} s "
              "(target < 120 s)", flush=True)
    print(f"  batched / per-input: {times[MAX_BATCH] / times[1]:.2f}")


if __name__ == "__main__":
    main()
