"""Generated shape images whose class is decided by one known region.

Each image holds exactly one shape (circle, square, triangle, cross or star) of random size, colour,
position and tilt, pasted in one flat colour on clutter: a smooth coloured texture, blotches of other
colours, thin lines and pixel noise. Clutter never contains a class shape, so the shape's mask is the
ground truth for "where the evidence is" (pointing game, deletion curves) and the label depends on it only.

Every example is drawn from its own random stream derived from (seed, split, index): `generate(10)[:5]`
equals `generate(5)`, and the splits never share a stream.
"""
from __future__ import annotations

import math
import zlib
from dataclasses import dataclass

import numpy as np
from PIL import Image, ImageDraw

LABELS: list[str] = ["circle", "square", "triangle", "cross", "star"]
DEFAULT_SIZE = 64
RADIUS_RANGE = (0.17, 0.3)
"""Shape circumradius as a fraction of the image side: 11-19 px at 64 px, several ViT patches wide."""
MAX_TILT = math.radians(15)
"""Shapes are drawn upright, tilted by at most this: a tiny ViT learns tilted templates far faster than full
rotation invariance (the star, square and triangle would otherwise look alike at a few pixels)."""


@dataclass(frozen=True)
class ImageExample:
    """One generated image: `image` uint8 (H, W, 3) RGB, its `label`, and the shape's pixels `mask` (H, W)."""

    image: np.ndarray
    label: str
    mask: np.ndarray


def generate(n: int, seed: int = 0, split: str = "test", size: int = DEFAULT_SIZE) -> list[ImageExample]:
    """`n` examples, labels cycling through `LABELS` (balanced), reproducible from (seed, split)."""
    split_key = zlib.crc32(split.encode("utf-8"))
    return [
        _example(np.random.default_rng([seed, split_key, i]), LABELS[i % len(LABELS)], size)
        for i in range(n)
    ]


def _example(rng: np.random.Generator, label: str, size: int) -> ImageExample:
    background = _clutter(rng, size)
    radius = rng.uniform(*RADIUS_RANGE) * size
    margin = radius + 1
    centre = rng.uniform(margin, size - margin, 2)
    angle = rng.uniform(-MAX_TILT, MAX_TILT)
    mask = _shape_mask(label, centre, radius, angle, size)
    colour = _distinct_colour(rng, background[mask].mean(axis=0))
    image = background.copy()
    image[mask] = colour
    return ImageExample(image=image, label=label, mask=mask)


def _shape_mask(label: str, centre: np.ndarray, radius: float, angle: float, size: int) -> np.ndarray:
    """Boolean mask of one shape with circumradius `radius` (the cross is an arm-span of 2 * radius)."""
    canvas = Image.new("L", (size, size), 0)
    draw = ImageDraw.Draw(canvas)
    cx, cy = float(centre[0]), float(centre[1])
    if label == "circle":
        draw.ellipse([cx - radius, cy - radius, cx + radius, cy + radius], fill=1)
    else:
        draw.polygon(_polygon(label, radius, angle, cx, cy), fill=1)
    return np.asarray(canvas, dtype=bool)


def _polygon(label: str, radius: float, angle: float, cx: float, cy: float) -> list[tuple[float, float]]:
    up = -math.pi / 2  # image y points down: this vertex is the top one
    if label == "square":
        points = [(radius * math.cos(a), radius * math.sin(a)) for a in np.arange(4) * math.pi / 2 + math.pi / 4]
    elif label == "triangle":
        points = [(radius * math.cos(a), radius * math.sin(a)) for a in np.arange(3) * 2 * math.pi / 3 + up]
    elif label == "star":
        points = [
            ((radius if k % 2 == 0 else 0.48 * radius) * math.cos(k * math.pi / 5 + up),
             (radius if k % 2 == 0 else 0.48 * radius) * math.sin(k * math.pi / 5 + up))
            for k in range(10)
        ]
    elif label == "cross":
        w = 0.33 * radius
        r = radius
        points = [(w, w), (w, r), (-w, r), (-w, w), (-r, w), (-r, -w), (-w, -w), (-w, -r), (w, -r), (w, -w),
                  (r, -w), (r, w)]
    else:
        raise ValueError(f"unknown shape {label!r}; expected one of {LABELS}")
    c, s = math.cos(angle), math.sin(angle)
    return [(cx + c * x - s * y, cy + s * x + c * y) for x, y in points]


def _clutter(rng: np.random.Generator, size: int) -> np.ndarray:
    """A shape-free background: smooth texture, irregular blotches, thin lines and pixel noise."""
    image = _smooth_field(rng, size, cells=int(rng.integers(2, 6)), channels=3) * rng.uniform(80, 200) + rng.uniform(
        0, 255 - 200, 3
    )
    for _ in range(int(rng.integers(1, 4))):  # irregular blotches: thresholded smooth noise, never a clean shape
        field = _smooth_field(rng, size, cells=int(rng.integers(4, 9)), channels=1)
        field += 0.35 * _smooth_field(rng, size, cells=int(rng.integers(12, 20)), channels=1)  # ragged edges
        blotch = field[..., 0] > rng.uniform(0.85, 1.0)
        image[blotch] = rng.uniform(0, 255, 3)
    canvas = Image.fromarray(np.clip(image, 0, 255).astype(np.uint8))
    draw = ImageDraw.Draw(canvas)
    for _ in range(int(rng.integers(2, 7))):
        start = rng.uniform(0, size, 2)
        end = start + rng.normal(0, size / 2.5, 2)
        draw.line([tuple(start), tuple(end)], fill=tuple(int(v) for v in rng.integers(0, 256, 3)),
                  width=int(rng.integers(1, 3)))
    noisy = np.asarray(canvas, dtype=np.float32) + rng.normal(0, rng.uniform(3, 14), (size, size, 3))
    return np.clip(noisy, 0, 255).astype(np.uint8)


def _smooth_field(rng: np.random.Generator, size: int, *, cells: int, channels: int) -> np.ndarray:
    """Random values on a coarse grid, bicubically upsampled to (size, size, channels) in [0, 1]."""
    coarse = (rng.uniform(0, 255, (cells, cells, channels))).astype(np.uint8)
    mode = "RGB" if channels == 3 else "L"
    fine = Image.fromarray(coarse if channels == 3 else coarse[..., 0], mode).resize((size, size), Image.BICUBIC)
    return np.asarray(fine, dtype=np.float32).reshape(size, size, channels) / 255.0


def _distinct_colour(rng: np.random.Generator, around: np.ndarray) -> np.ndarray:
    """A random colour at least ~100 (Euclidean RGB) away from `around`, so the shape always stands out."""
    for _ in range(50):
        colour = rng.integers(0, 256, 3)
        if np.linalg.norm(colour - around) >= 100:
            return colour.astype(np.uint8)
    return np.where(around < 128, 255, 0).astype(np.uint8)
