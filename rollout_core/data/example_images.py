"""Bundled example images: photos that ship inside scikit-image's wheel, plus generated shapes images.

The photos are used in place (no copy, no download). The shapes examples are written once as PNG into
`models_dir().parent / "examples"`; they are deterministic, so every machine gets the same pixels, and
their ground-truth masks are those of `shapes.generate(5, seed=0, split="examples")`.
"""
from __future__ import annotations

import importlib.util
import os
import tempfile
from pathlib import Path

from rollout_core.extras import MissingExtraError, missing_message
from rollout_core.paths import models_dir

PHOTOS = {"astronaut": "astronaut.png", "chelsea": "chelsea.png", "coffee": "coffee.png", "rocket": "rocket.jpg"}
SHAPE_EXAMPLES = ("triangle", "cross", "star")
SHAPES_SPLIT = {"seed": 0, "split": "examples"}


def example_images() -> dict[str, Path]:
    """Name -> path of every bundled example: the four photos, then `shapes-<label>` images."""
    examples = {name: _skimage_data_dir() / file for name, file in PHOTOS.items()}
    examples.update(_shape_examples())
    return examples


def _skimage_data_dir() -> Path:
    spec = importlib.util.find_spec("skimage")
    if spec is None or not spec.submodule_search_locations:
        raise MissingExtraError(missing_message("scikit-image", "setup", "the example photos (inside its wheel)"))
    return Path(list(spec.submodule_search_locations)[0]) / "data"


def _shape_examples() -> dict[str, Path]:
    from PIL import Image

    from rollout_core.data import shapes

    folder = models_dir().parent / "examples"
    paths = {f"shapes-{label}": folder / f"shapes-{label}.png" for label in SHAPE_EXAMPLES}
    if all(path.is_file() for path in paths.values()):
        return paths
    folder.mkdir(parents=True, exist_ok=True)
    by_label = {e.label: e for e in shapes.generate(len(shapes.LABELS), **SHAPES_SPLIT)}
    for label in SHAPE_EXAMPLES:
        # Written under a temporary name and renamed, so a concurrent reader never sees half a file.
        handle, temporary = tempfile.mkstemp(suffix=".png", dir=folder)
        os.close(handle)
        Image.fromarray(by_label[label].image).save(temporary, "PNG")
        os.replace(temporary, paths[f"shapes-{label}"])
    return paths
