"""The deletion check of one map against random orderings, and the far-from-the-shapes statistic."""
from __future__ import annotations

import numpy as np
import pytest
import torch
from PIL import Image

from rollout_core.models import domain


def test_check_deletion_equals_a_naive_masking_loop(tiny_handle) -> None:
    from rollout_core.explain import explain_text
    from rollout_core.faithfulness.check import check_deletion

    handle = tiny_handle("bert")
    text = "the plot was dull but the actors were wonderful"
    exp = explain_text(handle, text, method="attention")
    result = check_deletion(handle, text, exp, seeds=4)
    ids = handle.processor(text, return_tensors="pt")["input_ids"][0]
    inner = list(range(1, len(ids) - 1))  # [CLS] and [SEP] are never removed

    def deletion_auc(scores: np.ndarray) -> float:
        order = sorted(inner, key=lambda i: (-scores[i], i))
        with torch.no_grad():
            base = torch.softmax(handle.model(input_ids=ids[None]).logits, -1)[0]
        target = int(base.argmax())
        values = []
        for step in range(11):
            masked = ids.clone()
            for i in order[:int(round(step / 10 * len(inner)))]:
                masked[i] = handle.processor.mask_token_id
            with torch.no_grad():
                values.append(float(torch.softmax(handle.model(input_ids=masked[None]).logits, -1)[0, target]))
        return sum((values[i] + values[i + 1]) / 2 * 0.1 for i in range(10))

    assert result.method_auc == pytest.approx(deletion_auc(np.asarray(exp.scores)), abs=1e-5)
    randoms = [deletion_auc(torch.rand(len(ids), generator=torch.Generator().manual_seed(s),
                                       dtype=torch.float64).numpy()) for s in range(4)]
    assert result.random_auc == pytest.approx(np.mean(randoms), abs=1e-5)
    assert result.random_std == pytest.approx(np.std(randoms), abs=1e-5)
    assert result.seeds == 4 and result.label in handle.labels


def test_colourfulness_by_hand() -> None:
    grey = np.full((4, 4, 3), 120, dtype=np.uint8)
    assert domain.colourfulness(grey) == 0.0
    half = grey.copy()
    half[:2, :, 0] = 255  # half the pixels: max 255, min 120
    assert domain.colourfulness(half) == pytest.approx(0.5 * 135 / 255)
    assert domain.colourfulness(np.zeros((4, 4))) == 0.0  # a greyscale array


def test_reasons_follow_the_two_thresholds() -> None:
    colourful = np.zeros((2, 2, 3), dtype=np.uint8)
    colourful[..., 0] = 255
    assert not domain.shapes_domain(colourful, 0.95).far
    assert domain.shapes_domain(colourful, 0.75).reasons[0].startswith("the model is unsure (75%")
    both = domain.shapes_domain(np.zeros((2, 2, 3), dtype=np.uint8), 0.5)
    assert len(both.reasons) == 2 and "nearly grey" in both.reasons[1]
    assert domain.is_shapes_model("default-image") and not domain.is_shapes_model("dinov2-small")


@pytest.mark.slow
def test_default_image_bundled_shapes_in_domain_and_skimage_photos_far() -> None:
    from rollout_core.data.example_images import example_images
    from rollout_core.errors import RolloutError
    from rollout_core.explain import explain_image
    from rollout_core.models.loading import load_model

    try:
        handle = load_model("default-image")
    except RolloutError as err:
        pytest.skip(f"default-image not available: {err}")
    examples = example_images()

    def check(name: str) -> domain.DomainCheck:
        image = np.asarray(Image.open(examples[name]).convert("RGB"))
        exp = explain_image(handle, image, method="attention")
        return domain.shapes_domain(exp.image, exp.prediction[0].probability)

    assert not check("shapes-triangle").far
    for photo in ("chelsea", "coffee", "astronaut"):
        assert check(photo).far, photo
