"""The deletion check of one map against random orderings, and the out-of-domain statistics and notes."""
from __future__ import annotations

import dataclasses

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


def _stats(rank: int, seed: int = 0) -> tuple[domain.DomainStatistics, np.ndarray, np.ndarray]:
    """Statistics fitted on random 3-class data in 6 dimensions, and that data (features, labels)."""
    rng = np.random.default_rng(seed)
    labels = np.repeat(np.arange(3), 40)
    features = rng.normal(size=(120, 6)) @ rng.normal(size=(6, 6)) + 4 * rng.normal(size=(3, 6))[labels]
    held = rng.normal(size=(50, 6)) @ rng.normal(size=(6, 6))
    return domain.fit(features, labels, held, rng.uniform(0.5, 1.0, 50), module="m", fingerprint="f",
                      dataset="data", rank=rank, shrink=0.2, quantile=0.9), features, labels


def test_distance_is_the_mahalanobis_distance_to_the_nearest_class_mean_by_hand() -> None:
    stats, x, labels = _stats(rank=6)
    means = np.stack([x[labels == c].mean(0) for c in range(3)])
    r = x - means[labels]
    cov = r.T @ r / (len(x) - 3)
    cov = 0.8 * cov + 0.2 * np.trace(cov) / 6 * np.eye(6)
    inverse = np.linalg.inv(cov)
    probe = np.random.default_rng(1).normal(size=(5, 6)) * 3
    naive = [min(float(np.sqrt((p - m) @ inverse @ (p - m))) for m in means) for p in probe]
    np.testing.assert_allclose(stats.distance(probe), naive, rtol=1e-9)
    # a low rank keeps the top directions exactly and one variance (the others' mean) for the rest
    low, _, _ = _stats(rank=2)
    values, vectors = np.linalg.eigh(cov)
    top, others = vectors[:, -2:], values[:-2].mean()
    d = probe[:, None, :] - means[None]
    along = d @ top
    by_hand = np.sqrt(((along ** 2) / values[-2:]).sum(-1) + ((d ** 2).sum(-1) - (along ** 2).sum(-1)) / others)
    np.testing.assert_allclose(low.distance(probe), by_hand.min(-1), rtol=1e-9)


def test_statistics_round_trip_and_apply_only_to_the_weights_they_were_fitted_on(
        tmp_path, monkeypatch: pytest.MonkeyPatch, tiny_handle) -> None:
    handle = tiny_handle("vit")
    stats, _, _ = _stats(rank=3)
    stats = domain.DomainStatistics(**{**stats.__dict__, "module": "classifier",
                                       "fingerprint": domain.weights_fingerprint(handle.model, "classifier")})
    monkeypatch.setattr(domain, "DOMAIN_DIR", tmp_path)
    domain.statistics.cache_clear()
    named = dataclasses.replace(handle, name="tiny-vit")  # statistics are looked up by registry name
    domain.save(stats, tmp_path / f"tiny-vit{domain.SUFFIX}")
    loaded = domain.applicable(named)
    assert loaded is not None and loaded.fingerprint == stats.fingerprint and loaded.dataset == "data"
    probe = np.ones((2, 6))
    np.testing.assert_allclose(loaded.distance(probe), stats.distance(probe), rtol=5e-3)  # stored as float16
    domain.save(domain.DomainStatistics(**{**stats.__dict__, "fingerprint": "other weights"}),
                tmp_path / f"tiny-vit{domain.SUFFIX}")
    domain.statistics.cache_clear()
    assert domain.applicable(named) is None  # statistics of another training run are never applied
    domain.statistics.cache_clear()


def test_record_features_keeps_the_classifier_input_of_this_thread_only(tiny_handle) -> None:
    import threading

    handle = tiny_handle("vit")
    pixels = torch.rand(2, 3, 32, 32)
    seen_elsewhere: list = []
    with domain.record_features(handle.model, "classifier") as found, torch.no_grad():
        handle.model(pixel_values=pixels)
        other = threading.Thread(target=lambda: handle.model(pixel_values=pixels))
        other.start()
        other.join()
        seen_elsewhere.append(len(found))
    with torch.no_grad():
        hidden = handle.model.vit(pixel_values=pixels).last_hidden_state[:, 0]
    assert seen_elsewhere == [1] and found[0].shape == (2, hidden.shape[-1])
    np.testing.assert_allclose(found[0].numpy(), hidden.numpy(), rtol=1e-5, atol=1e-6)


def test_image_notes_name_each_reason() -> None:
    from rollout_core.reliability.image import OUT_OF_DOMAIN, image_notes

    common = dict(dataset="generated shapes", label="cross", threshold=30.0, grey_below=0.1, unsure_below=0.9)
    assert image_notes("m", probability=0.99, distance=20.0, colourfulness=0.3, **common) == ()
    (far,) = image_notes("m", probability=0.95, distance=41.0, colourfulness=0.3, **common)
    assert far.startswith(OUT_OF_DOMAIN) and "lie 41 from" in far and "within 30" in far and "(cross, 95%)" in far
    (grey,) = image_notes("m", probability=0.99, distance=20.0, colourfulness=0.02, **common)
    assert "nearly grey (colourfulness 0.02" in grey and "lie" not in grey
    (unsure,) = image_notes("m", probability=0.62, distance=20.0, colourfulness=0.3, **common)
    assert unsure.startswith("Uncertain: 62% for cross")


@pytest.mark.slow
def test_default_image_flags_photos_even_when_confident_and_not_its_shapes() -> None:
    from rollout_core.data.example_images import example_images
    from rollout_core.errors import RolloutError
    from rollout_core.explain import explain_image
    from rollout_core.models.loading import load_model
    from rollout_core.reliability.image import OUT_OF_DOMAIN

    try:
        handle = load_model("default-image")
    except RolloutError as err:
        pytest.skip(f"default-image not available: {err}")
    if domain.applicable(handle) is None:
        pytest.fail("default-image's domain statistics do not match its weights: run python -m training.fit_domain")
    examples = example_images()

    def explained(name: str):
        return explain_image(handle, Image.open(examples[name]), method="attention")

    for shape in ("shapes-triangle", "shapes-cross", "shapes-star"):
        assert explained(shape).warnings == (), shape
    rocket = explained("rocket")
    assert rocket.prediction[0].probability > 0.9  # confident, and still flagged: by its features
    assert rocket.warnings and rocket.warnings[0].startswith(OUT_OF_DOMAIN) and "features" in rocket.warnings[0]
    for photo in ("chelsea", "coffee", "astronaut"):
        assert explained(photo).warnings[0].startswith(OUT_OF_DOMAIN), photo
