"""What the layer slider sends with the page, old (every view drawn: HTML and figures per layer) against new (numbers
per layer, texts and figures once), side by side.

Cases: a 512-token text on default-text (6 layers), the image page's default-image (random photo), and a
synthetic 32-layer x 4096-token text (random scores, no model). "old" is layer_views.py of BASELINE (the last
commit that drew views), run from git on this checkout's other modules; without git it is left out. Run:
    OMP_NUM_THREADS=1 python benchmarks/bench_payload.py [--skip-old-synthetic]
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import subprocess
import sys
import time
from pathlib import Path
from types import ModuleType
from typing import Any, Callable

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from rollout_core.explanation import Explanation  # noqa: E402
from rollout_core.figures import layer_views  # noqa: E402

BASELINE = "bef00d6"
"""The commit whose layer_views.py drew every view (the "old" column)."""
WORDS = "the film was good but far too long and the acting felt flat while the music soared".split()


def old_layer_views() -> ModuleType | None:
    """layer_views.py as of BASELINE, loaded as a module, or None when git or the commit is missing."""
    try:
        source = subprocess.run(["git", "-C", str(ROOT), "show", f"{BASELINE}:rollout_core/figures/layer_views.py"],
                                capture_output=True, text=True, check=True, timeout=60).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    spec = importlib.util.spec_from_loader("old_layer_views", loader=None)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    exec(compile(source, "old_layer_views.py", "exec"), module.__dict__)  # noqa: S102 - our own history
    return module


def synthetic_text(layers: int, tokens: int, seed: int = 0) -> Explanation:
    """A text explanation with random per-layer shares (one word per token, [CLS] and [SEP] around them)."""
    rng = np.random.default_rng(seed)
    n = tokens + 2
    words = [WORDS[i % len(WORDS)] for i in range(tokens)]
    special = np.array([True] + [False] * tokens + [True])
    rows = rng.random((2, layers, n)) ** 4
    rows /= rows.sum(-1, keepdims=True)
    return Explanation(kind="text", method="rollout", model_name="synthetic", tokens=["[CLS]", *words, "[SEP]"],
                       special=special, scores=rows[0, -1], layer_scores=rows[0], layer_attention_scores=rows[1],
                       matrix=None, layer_attention=np.zeros((layers, 1, 1), np.float32), settings={},
                       target_description="row of [CLS]")


def model_cases() -> dict[str, Explanation]:
    """The 6 x 512 text and the image page's input on the built models (missing models are reported)."""
    import rollout_core
    from rollout_core import explain
    from rollout_core.errors import RolloutError

    cases: dict[str, Explanation] = {}
    try:
        text = " ".join(WORDS[i % len(WORDS)] for i in range(600))
        expl = explain.explain_text(rollout_core.load_model("default-text"), text)
        cases[f"default-text {expl.num_layers} x {len(expl.tokens)}"] = expl
    except RolloutError as err:
        print(f"default-text: {err}", file=sys.stderr)
    try:
        image = np.random.default_rng(0).integers(0, 256, (224, 224, 3), dtype=np.uint8)
        expl = explain.explain_image(rollout_core.load_model("default-image"), image)
        cases[f"default-image {expl.num_layers} x {len(expl.tokens)}"] = expl
    except RolloutError as err:
        print(f"default-image: {err}", file=sys.stderr)
    return cases


def sizes(expl: Explanation, old: ModuleType | None) -> tuple[int | None, float | None, int, float]:
    """(old bytes, old seconds, new bytes, new seconds) of the page's payload for `expl`."""
    def timed(build: Callable[[], Any]) -> tuple[int, float]:
        start = time.perf_counter()
        size = len(json.dumps(build()))
        return size, time.perf_counter() - start

    if expl.kind == "image":
        new = timed(lambda: layer_views.image_payload(expl))
        views = (lambda: old.image_views(expl)) if old else None
    else:
        new = timed(lambda: layer_views.text_payload(expl))
        views = (lambda: old.text_views(expl)) if old else None
    if views is None:
        return None, None, *new
    return (*timed(lambda: old.views_payload(views())), *new)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--skip-old-synthetic", action="store_true", help="do not draw the old 32 x 4096 views")
    args = parser.parse_args()
    old = old_layer_views()
    if old is None:
        print(f"(git or commit {BASELINE} missing: old column left out)", file=sys.stderr)
    cases = {**model_cases(), "synthetic 32 x 4096": synthetic_text(32, 4096)}
    print(f"{'case (layers x tokens)':28s} {'old KB':>9s} {'new KB':>8s} {'old/new':>8s} {'old s':>7s} {'new s':>6s}"
          f" {'new B/value':>11s}")
    for name, expl in cases.items():
        skip = args.skip_old_synthetic and name.startswith("synthetic")
        old_bytes, old_s, new_bytes, new_s = sizes(expl, None if skip else old)
        shown = len(expl.display_positions()) if expl.kind == "text" else len(expl.patch_positions)
        values = 2 * expl.num_layers * shown
        ratio = f"{old_bytes / new_bytes:8.1f}" if old_bytes else f"{'n/a':>8s}"
        old_kb = f"{old_bytes / 1e3:9.0f}" if old_bytes else f"{'n/a':>9s}"
        old_t = f"{old_s:7.1f}" if old_s is not None else f"{'n/a':>7s}"
        print(f"{name:28s} {old_kb} {new_bytes / 1e3:8.0f} {ratio} {old_t} {new_s:6.1f} {new_bytes / values:11.1f}")


if __name__ == "__main__":
    main()
