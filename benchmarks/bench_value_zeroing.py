"""Value zeroing's maths (`value_zeroing_contributions`) of this tree beside an older copy of the module, run
alternately in one process on one torch thread, on the embedded models; with --float64, each one's per-layer
distance from a float64 run of the same model (the reference: the model's weights in float64; minutes on an image).

    git show <rev>:rollout_core/maths/value_zeroing.py > /tmp/old_value_zeroing.py
    python benchmarks/bench_value_zeroing.py --old /tmp/old_value_zeroing.py [--cases text16 text64 image] [--repeats 3]
"""
from __future__ import annotations

import argparse
import copy
import importlib.util
import os
import statistics
import time

import torch

from rollout_core.data.shapes import generate
from rollout_core.inputs.images import load_image, model_pixels
from rollout_core.maths import value_zeroing
from rollout_core.models.loading import load_model

WORDS = "the film was not as bad as the critics said and the acting was good though the plot dragged".split()


def case_inputs(case: str) -> tuple[object, dict]:
    """textN: default-text on N words; image: default-image on the seed-5 generated test shape (257 tokens)."""
    if case.startswith("text"):
        handle = load_model("default-text")
        words = (WORDS * 100)[:int(case[4:])]
        return handle, dict(handle.processor([" ".join(words)], return_tensors="pt"))
    handle = load_model("default-image")
    pixels = model_pixels(handle.processor, load_image(generate(1, seed=5, split="test")[0].image))
    return handle, {"pixel_values": pixels}


def run(module, model: torch.nn.Module, inputs: dict) -> torch.Tensor:
    with torch.no_grad():
        states = model(**inputs, output_hidden_states=True).hidden_states
    return module.value_zeroing_contributions(model, states, inputs.get("attention_mask"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--old", required=True, help="an older rollout_core/maths/value_zeroing.py")
    parser.add_argument("--cases", nargs="+", default=["text16", "text64", "image"])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--float64", action="store_true", help="also each one's distance from a float64 run")
    args = parser.parse_args()
    spec = importlib.util.spec_from_file_location("old_value_zeroing", args.old)
    old = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(old)
    torch.set_num_threads(1)
    print(f"torch threads 1; load average {os.getloadavg()[0]:.2f} at start")
    for case in args.cases:
        handle, inputs = case_inputs(case)
        times: dict[str, list[float]] = {"old": [], "new": []}
        results = {}
        for _ in range(args.repeats):
            for name, module in (("old", old), ("new", value_zeroing)):
                start = time.perf_counter()
                results[name] = run(module, handle.model, inputs)
                times[name].append(time.perf_counter() - start)
        o, n = statistics.median(times["old"]), statistics.median(times["new"])
        line = f"{case}: {results['new'].shape[-1]} tokens, old {o:.3f} s, new {n:.3f} s, new / old {n / o:.2f}"
        if args.float64:
            wide = copy.deepcopy(handle.model).double()
            reference = run(value_zeroing, wide, {k: v.double() if v.is_floating_point() else v
                                                  for k, v in inputs.items()})
            for name in ("old", "new"):
                per_layer = (results[name] - reference).abs().amax(dim=(1, 2, 3))
                line += f"\n  {name} vs float64, per layer: " + " ".join(f"{e:.1e}" for e in per_layer)
        print(line, flush=True)
    print(f"load average {os.getloadavg()[0]:.2f} at the end")


if __name__ == "__main__":
    main()
