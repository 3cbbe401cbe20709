"""Dashboard latency: a new input to a ready Explanation, with the model already loaded.

Text: `explain_text` on the "default-text" model, one new sentence per call.
Image: `explain_image` on the "default-image" model, one new image per call (a generated shapes
image, so no two calls see the same pixels).
Each figure is the median of several calls after one warm-up call; min and max are shown too. The
same inputs are then explained with capture="lowmem" (rollout_core.lowmem), measured in the same run.
Models come from `python -m rollout_core setup` (default-text) and the committed assets
(default-image); a model that is not there is reported, not failed.

Run: python benchmarks/bench_dashboard_path.py [--quick]
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any, Callable

ROOT = Path(__file__).resolve().parents[1]


def _timings(call: Callable[[Any], Any], inputs: list[Any]) -> list[float]:
    call(inputs[0])  # warm-up: first-call allocations, lazy imports
    seconds = []
    for item in inputs[1:]:
        start = time.perf_counter()
        call(item)
        seconds.append(time.perf_counter() - start)
    return seconds


def _report(label: str, seconds: list[float]) -> None:
    print(f"{label:<44} median {statistics.median(seconds) * 1000:8.1f} ms   "
          f"min {min(seconds) * 1000:8.1f} ms   max {max(seconds) * 1000:8.1f} ms   ({len(seconds)} calls)")


def _sentences(count: int) -> list[str]:
    from rollout_core.data.sentiment import generate

    return [example.text for example in generate(count, seed=123, split="test")]


def _images(count: int) -> list[Any]:
    from rollout_core.data.shapes import generate

    return [example.image for example in generate(count, seed=321, split="test")]


def _bench(name: str, label: str, inputs: Callable[[int], list[Any]], explain: str, count: int) -> None:
    import rollout_core
    from rollout_core.errors import RolloutError

    try:
        handle = rollout_core.load_model(name)
    except (RolloutError, ImportError, AttributeError, OSError) as err:
        print(f"{label:<44} not available: {type(err).__name__}: {err}")
        return
    function = getattr(rollout_core, explain)
    items = inputs(count + 1)
    default = _timings(lambda x: function(handle, x), items)
    streamed = _timings(lambda x: function(handle, x, capture="lowmem"), items)
    _report(f"{label} ({handle.family}, {handle.num_layers} layers)", default)
    _report("  same inputs, capture='lowmem' (streaming)", streamed)
    print(f"  streaming / default median: {statistics.median(streamed) / statistics.median(default):.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="5 calls per model instead of 20")
    parser.add_argument("--text-model", default="default-text", help="registry name, folder or hub id")
    parser.add_argument("--image-model", default="default-image", help="registry name, folder or hub id")
    args = parser.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import torch

    torch.set_num_threads(1)
    sys.path.insert(0, str(ROOT))
    count = 5 if args.quick else 20
    print("new input -> Explanation ready, model loaded, rollout with default settings, torch threads 1")
    _bench(args.text_model, f"text: new sentence, {args.text_model}", _sentences, "explain_text", count)
    _bench(args.image_model, f"image: new image, {args.image_model}", _images, "explain_image", count)


if __name__ == "__main__":
    main()
