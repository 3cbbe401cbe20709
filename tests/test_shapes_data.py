"""The generated shapes data: reproducible, balanced, and each mask is exactly the shape's pixels."""
from __future__ import annotations

from collections import Counter

import numpy as np
from scipy import ndimage

from rollout_core.data.shapes import LABELS, generate


def test_same_seed_same_images_and_prefix_stable():
    first, again = generate(12, seed=3, split="train"), generate(12, seed=3, split="train")
    for a, b in zip(first, again):
        assert a.label == b.label and np.array_equal(a.image, b.image) and np.array_equal(a.mask, b.mask)
    for a, b in zip(generate(5, seed=3, split="train"), first):
        assert np.array_equal(a.image, b.image)


def test_splits_and_seeds_differ():
    test, train, other_seed = generate(10), generate(10, split="train"), generate(10, seed=1)
    for a, b, c in zip(test, train, other_seed):
        assert not np.array_equal(a.image, b.image) and not np.array_equal(a.image, c.image)


def test_types_shapes_and_balanced_labels():
    examples = generate(50, size=48)
    assert Counter(e.label for e in examples) == {label: 10 for label in LABELS}
    for e in examples:
        assert e.image.dtype == np.uint8 and e.image.shape == (48, 48, 3)
        assert e.mask.dtype == bool and e.mask.shape == (48, 48)


def test_mask_is_one_connected_flat_coloured_region_distinct_from_its_surround():
    for e in generate(60, seed=7, split="val"):
        labelled, count = ndimage.label(e.mask, structure=np.ones((3, 3)))  # 8-connected: thin tips
        assert count == 1, e.label
        inside = e.image[e.mask].astype(int)
        assert (inside == inside[0]).all(), "the shape is painted in one flat colour"
        ring = ndimage.binary_dilation(e.mask, iterations=2) & ~e.mask
        # Most of the pixels just outside the mask differ from the shape colour: the mask is not too small...
        assert (np.abs(e.image[ring].astype(int) - inside[0]).sum(axis=1) > 0).mean() > 0.9
        # ...and the area fits the shape drawn: fraction of the image covered by one shape.
        assert 0.005 < e.mask.mean() < 0.5


def test_shape_geometry_matches_its_label():
    # Independent check of which shape was drawn, from the mask alone: fill ratio against the minimal
    # enclosing circle is ~1 for a disc and lower for the polygons; a star is concave (solidity well below 1).
    from skimage.measure import regionprops

    for e in generate(40, seed=11, split="val", size=96):
        props = regionprops(e.mask.astype(np.uint8))[0]
        if e.label == "circle":
            assert props.solidity > 0.95 and props.eccentricity < 0.3
        elif e.label == "square":
            assert props.solidity > 0.93 and props.eccentricity < 0.45  # PIL may shear a near-level edge by 1 px
        elif e.label == "triangle":
            assert props.solidity > 0.9 and props.extent < 0.75
        elif e.label == "cross":
            assert 0.45 < props.solidity < 0.8
        elif e.label == "star":
            assert 0.4 < props.solidity < 0.75


def test_example_images_exist_decode_and_shapes_are_deterministic(tmp_path, monkeypatch):
    from rollout_core.data.example_images import SHAPES_SPLIT, example_images
    from rollout_core.inputs.images import load_image

    monkeypatch.setenv("ROLLOUT_MODELS_DIR", str(tmp_path / "models"))
    examples = example_images()
    assert {"astronaut", "chelsea", "coffee", "rocket"} <= set(examples)
    shape_names = [name for name in examples if name.startswith("shapes-")]
    assert len(shape_names) >= 2
    for name, path in examples.items():
        assert path.is_file(), name
        image = load_image(path)
        assert image.mode == "RGB" and min(image.size) >= 32
    by_label = {e.label: e for e in generate(len(LABELS), **SHAPES_SPLIT)}
    for name in shape_names:
        assert examples[name].parent == tmp_path / "examples"
        assert np.array_equal(np.asarray(load_image(examples[name])), by_label[name.removeprefix("shapes-")].image)
    assert example_images() == examples  # a second call reuses the written files
