"""Calibration: 10-bin ECE (hand-computed), temperature fitting (recovers a known temperature), and the
temperature a model folder stores reaching every probability explain_text reports."""
from __future__ import annotations

import json
import math
import shutil

import pytest
import torch

from rollout_core.calibration import CONFIG_KEY, classifier_ece, expected_calibration_error, fit_temperature
from rollout_core.explain import explain_text, explain_texts
from rollout_core.models.loading import load_model


def test_ece_of_a_hand_computed_case():
    # bins (k/10, (k+1)/10]: 0.95 -> bin 9 (right), 0.85 -> bin 8 (wrong), 0.55 and 0.58 -> bin 5 (one right),
    # 0.5 -> bin 4 (right). ECE = 1/5 |1-.95| + 1/5 |0-.85| + 2/5 |.5-.565| + 1/5 |1-.5| = .01+.17+.026+.1
    ece = expected_calibration_error([0.95, 0.85, 0.55, 0.58, 0.5], [True, False, True, False, True])
    assert ece == pytest.approx(0.306, abs=1e-12)


def test_ece_is_zero_when_confidence_matches_accuracy_and_checks_its_input():
    assert expected_calibration_error([0.75] * 4, [True, True, True, False]) == pytest.approx(0.0)
    with pytest.raises(ValueError):
        expected_calibration_error([0.9, 0.8], [True])


def test_classifier_ece_uses_the_temperature():
    logits = torch.tensor([[0.0, math.log(9.0)], [0.0, math.log(9.0)]])  # P = 0.9 at T=1
    labels = torch.tensor([1, 0])  # accuracy 0.5
    assert classifier_ece(logits, labels) == pytest.approx(0.4)
    assert classifier_ece(logits, labels, temperature=1e6) == pytest.approx(0.0, abs=1e-5)  # P -> 0.5


@pytest.mark.parametrize("true_temperature", [0.5, 2.5])
def test_fit_temperature_recovers_a_known_temperature(true_temperature):
    generator = torch.Generator().manual_seed(0)
    logits = 3 * torch.randn(20000, 3, generator=generator)
    labels = torch.multinomial(torch.softmax(logits / true_temperature, -1), 1, generator=generator)[:, 0]
    assert fit_temperature(logits, labels) == pytest.approx(true_temperature, rel=0.05)


@pytest.fixture
def calibrated_bert(tiny_model_dir, tmp_path):
    """tiny-bert copied with a temperature of 3 in its config."""
    folder = tmp_path / "calibrated-bert"
    shutil.copytree(tiny_model_dir("bert"), folder)
    config = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps({**config, CONFIG_KEY: 3.0}))
    return folder


def test_displayed_probabilities_are_divided_by_the_stored_temperature(calibrated_bert):
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    text = "the movie was great fun"
    model = AutoModelForSequenceClassification.from_pretrained(calibrated_bert).eval()
    with torch.no_grad():
        logits = model(**AutoTokenizer.from_pretrained(calibrated_bert)(text, return_tensors="pt")).logits[0]
    expected = torch.softmax(logits / 3.0, -1)
    assert not torch.allclose(expected, torch.softmax(logits, -1), atol=1e-3)  # the temperature matters here
    handle = load_model(calibrated_bert)
    for explanation in (explain_text(handle, text), explain_texts(handle, [text, "x"])[0],
                        explain_text(handle, text, target=0, method="gradient")):
        shown = {p.index: p.probability for p in explanation.prediction}
        assert shown == pytest.approx({i: float(expected[i]) for i in range(len(expected))}, abs=1e-5)
        # the logits are the model's own, before the temperature (what the evaluation's scorer reads)
        assert explanation.logits == pytest.approx(logits.double().numpy(), abs=1e-5)
        assert explanation.to_dict()["logits"] == pytest.approx(logits.tolist(), abs=1e-5)
    assert explain_text(handle, text).prediction[0].index == int(logits.argmax())


def test_only_a_classifier_has_logits(tiny_handle):
    from rollout_core.explain import explain_image

    image = torch.rand(24, 24, 3).mul(255).to(torch.uint8).numpy()
    assert explain_image(tiny_handle("vit"), image).logits.shape == (tiny_handle("vit").model.config.num_labels,)
    for kind, source in (("sentence", "a cat"), ("gpt2", "a cat sat"), ("t5", "a cat sat")):
        assert explain_text(tiny_handle(kind), source).logits is None, kind
    assert explain_image(tiny_handle("dinov2"), image).logits is None
    assert explain_text(tiny_handle("sentence"), "a cat").to_dict()["logits"] is None
    # zero-shot labels give a prediction, but from similarities, not the model's own logits
    zero_shot = explain_text(tiny_handle("sentence"), "a cat", labels=["animal", "food"])
    assert zero_shot.prediction and zero_shot.logits is None
