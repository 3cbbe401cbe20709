"""Is an image far from the generated shapes that default-image (and shapes-vit-tiny) were trained on?

Two simple statistics, measured on 100 generated test shapes and on scikit-image's photos (see the README's
model section): the model's top probability (shapes: median 0.99999, 5% quantile 0.96; photos: 0.38-0.95,
chelsea 0.76, coffee 0.87, astronaut 0.65) and colourfulness, the mean over pixels of (max - min channel) / 255
(shapes: at least 0.22, their clutter is always coloured; greyscale photos: 0). An image is far from the
domain when the top probability is below `MIN_PROBABILITY` or the colourfulness below `MIN_COLOURFULNESS`.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

SHAPES_MODELS = ("default-image", "shapes-vit-tiny")
"""Registry models trained on rollout_core.data.shapes only."""
MIN_PROBABILITY = 0.9
MIN_COLOURFULNESS = 0.1


@dataclass(frozen=True)
class DomainCheck:
    """The two statistics and the reasons (plain words) the image counts as far from the shapes, if any."""

    top_probability: float
    colourfulness: float
    reasons: tuple[str, ...]

    @property
    def far(self) -> bool:
        return bool(self.reasons)


def colourfulness(image: np.ndarray) -> float:
    """Mean over pixels of (max - min channel) / 255 of an (H, W, 3) uint8 RGB image (0 for greyscale)."""
    rgb = np.asarray(image, dtype=np.float64)
    if rgb.ndim != 3 or rgb.shape[-1] < 3:
        return 0.0
    rgb = rgb[..., :3]
    return float((rgb.max(axis=-1) - rgb.min(axis=-1)).mean() / 255.0)


def shapes_domain(image: np.ndarray, top_probability: float) -> DomainCheck:
    """How far `image` (as the model saw it) with the model's `top_probability` is from the shapes set."""
    colour = colourfulness(image)
    reasons = []
    if top_probability < MIN_PROBABILITY:
        reasons.append(f"the model is unsure ({top_probability:.0%} for its top class; on generated shapes it is "
                       f"above {MIN_PROBABILITY:.0%} in 95% of cases)")
    if colour < MIN_COLOURFULNESS:
        reasons.append(f"the image is nearly grey (colourfulness {colour:.2f}; every generated shape image is "
                       f"above {MIN_COLOURFULNESS:.2f})")
    return DomainCheck(float(top_probability), colour, tuple(reasons))


def is_shapes_model(name: str | None) -> bool:
    """True for the registry models that only know the generated shapes."""
    return name in SHAPES_MODELS
