"""Reliability notes for an image classifier's prediction: when an image is far from what the model was trained on.

For a model with shipped domain statistics (`rollout_core.models.domain`: the shapes models), three reasons, each
measured on held-out shapes and photos (docs/reliability.md): the model's features of the image lie beyond the
threshold distance from its training shapes' features; the image is nearly grey (every generated shape image is
coloured); the top probability is below the line that 98% of held-out shapes clear (`domain.UNSURE_QUANTILE`).
A photo of a rocket the model calls "cross 95%" is caught by the first, whatever the confidence.
"""
from __future__ import annotations

OUT_OF_DOMAIN = "Out of domain:"
"""How the note on an image unlike the training data starts (a page may offer another model beside it)."""


def image_notes(model: str, *, dataset: str, label: str | None, probability: float | None, distance: float,
                threshold: float, colourfulness: float, grey_below: float, unsure_below: float) -> tuple[str, ...]:
    """The notes for one image explained by `model` (trained on `dataset` only): `distance` of its features to the
    training features against the `threshold`, its `colourfulness` against `grey_below`, the top `probability`
    of `label` against `unsure_below`."""
    far = []
    if distance > threshold:
        far.append(f"the model's features of it lie {distance:.0f} from those of its training images, where "
                   f"99.5% of held-out {dataset} stay within {threshold:.0f}")
    if colourfulness < grey_below:
        far.append(f"it is nearly grey (colourfulness {colourfulness:.2f}; every image of {dataset} is above "
                   f"{grey_below:.2f})")
    unsure = probability is not None and probability < unsure_below
    if far:
        said = f" ({label}, {probability:.0%})" if label is not None and probability is not None else ""
        return (f"{OUT_OF_DOMAIN} {model} was trained on {dataset} only, and this image looks unlike them: "
                f"{'; '.join(far)}. Its prediction{said} and map say little about this image.",)
    if unsure:
        return (f"Uncertain: {probability:.0%} for {label} is low for {model} (on 98% of held-out {dataset} its "
                f"top probability is above {unsure_below:.0%}); read it as a weak lean, not a verdict.",)
    return ()
