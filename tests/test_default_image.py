"""The built default-image classifier: DINOv2-small with the committed fine-tuned top blocks, layernorm and
classifier, an ordinary transformers folder loaded offline with the Auto classes, accurate on fresh generated
shapes, built idempotently."""
from __future__ import annotations

import json
import os

import numpy as np
import pytest
import torch
from PIL import Image

from rollout_core.build import dinov2, image_model
from training import train_image_top
from rollout_core.build.image_model import SETTINGS_FILE, TRAINED_FILE
from rollout_core.data import shapes
from rollout_core.paths import ASSETS_DIR, models_dir

os.environ.setdefault("HF_HUB_OFFLINE", "1")
IMAGENET_MEAN = np.array([0.485, 0.456, 0.406])
IMAGENET_STD = np.array([0.229, 0.224, 0.225])


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """Build into a fresh models dir (the backbone linked from the usual one when built; else built there)."""
    models = tmp_path_factory.mktemp("models")
    backbone = models_dir() / dinov2.NAME
    patch = pytest.MonkeyPatch()
    if (backbone / dinov2.STAMP).is_file():
        (models / dinov2.NAME).symlink_to(backbone, target_is_directory=True)
    patch.setenv("ROLLOUT_MODELS_DIR", str(models))
    first, second = image_model.build(), image_model.build()
    yield models, first, second
    patch.undo()


@pytest.fixture(scope="module")
def loaded(built):
    from transformers import AutoImageProcessor, AutoModelForImageClassification

    folder = built[0] / image_model.NAME
    return AutoModelForImageClassification.from_pretrained(folder).eval(), AutoImageProcessor.from_pretrained(folder)


def _resolution() -> int:
    return _settings()["metrics"]["resolution"]


def _settings() -> dict:
    return json.loads(SETTINGS_FILE.read_text())


def test_committed_assets_are_small_fp16_and_recorded():
    from safetensors.torch import load_file

    assert TRAINED_FILE.stat().st_size <= 8_000_000
    assert sum(p.stat().st_size for p in ASSETS_DIR.rglob("*") if p.is_file()) <= 20_000_000
    settings = _settings()
    assert settings["labels"] == shapes.LABELS
    assert settings["metrics"]["images"]["test"] >= 1000
    trained = load_file(TRAINED_FILE)
    assert {v.dtype for v in trained.values()} == {torch.float16}
    blocks = settings["settings"]["trained_blocks"]
    expected_blocks = {str(i) for i in range(12 - blocks, 12)}  # DINOv2-small: 12 blocks
    layers = {key.split(".")[3] for key in trained if key.startswith("dinov2.encoder.layer.")}
    assert layers == expected_blocks
    others = {key.rsplit(".", 1)[0] for key in trained if not key.startswith("dinov2.encoder.layer.")}
    assert others == {"dinov2.layernorm", "classifier"}


def test_build_is_idempotent_and_leaves_no_work_folder(built):
    models, first, second = built
    assert "built" in first and "up to date" in second
    assert not [p for p in models.iterdir() if p.name.startswith(".")]
    names = {p.name for p in (models / image_model.NAME).iterdir()}
    assert {"config.json", "model.safetensors", "preprocessor_config.json"} <= names
    assert not any(name.endswith((".bin", ".pt", ".pth", ".pkl")) for name in names)


def test_loads_as_an_ordinary_dinov2_classifier_with_eager_attention(loaded):
    model, processor = loaded
    assert type(model).__name__ == "Dinov2ForImageClassification"
    assert model.config._attn_implementation == "eager"
    assert [model.config.id2label[i] for i in range(len(shapes.LABELS))] == shapes.LABELS
    inputs = processor(images=Image.fromarray(shapes.generate(1)[0].image), return_tensors="pt")
    with torch.no_grad():
        out = model(**inputs, output_attentions=True)
    tokens = (_resolution() // model.config.patch_size) ** 2 + 1
    assert len(out.attentions) == model.config.num_hidden_layers
    for attention in out.attentions:
        assert attention.shape == (1, model.config.num_attention_heads, tokens, tokens)


def test_processor_resizes_the_whole_image_without_crop(loaded):
    # Independent reference: PIL bicubic resize of the full 64 px image, then ImageNet normalisation.
    _, processor = loaded
    size = _resolution()
    image = shapes.generate(2, seed=3)[1].image
    expected = np.asarray(Image.fromarray(image).resize((size, size), Image.BICUBIC), np.float64) / 255
    expected = ((expected - IMAGENET_MEAN) / IMAGENET_STD).transpose(2, 0, 1)
    pixels = processor(images=Image.fromarray(image), return_tensors="pt")["pixel_values"][0]
    assert pixels.shape == (3, size, size)
    assert np.abs(pixels.numpy() - expected).max() < 1e-4


def test_weights_are_the_backbone_with_exactly_the_trained_parameters_replaced(built, loaded):
    from safetensors.torch import load_file
    from transformers import Dinov2Model

    model, _ = loaded
    backbone = Dinov2Model.from_pretrained(built[0] / dinov2.NAME).state_dict()
    trained = load_file(TRAINED_FILE)
    replaced = 0
    for key, value in model.state_dict().items():
        if key in trained:
            assert torch.equal(value, trained[key].float()), key
            replaced += 1
        else:
            assert torch.equal(value, backbone[key.removeprefix("dinov2.")]), key
    assert replaced == len(trained)
    changed = [k for k in trained if k.startswith("dinov2.")
               and not torch.equal(trained[k].float(), backbone[k.removeprefix("dinov2.")])]
    assert changed  # training did move the blocks


def test_logits_are_the_backbone_with_the_trained_blocks_through_the_committed_head(built, loaded):
    # Recomputed from the separate pieces: the backbone folder with the committed blocks swapped in (Dinov2Model,
    # not the classifier class) and the head written out by hand: Linear(concat(CLS, mean of patch tokens)).
    from safetensors.torch import load_file
    from transformers import Dinov2Model

    model, processor = loaded
    backbone = Dinov2Model.from_pretrained(built[0] / dinov2.NAME).eval()
    trained = {k: v.float() for k, v in load_file(TRAINED_FILE).items()}
    blocks = {k.removeprefix("dinov2."): v for k, v in trained.items() if k.startswith("dinov2.")}
    missing, unexpected = backbone.load_state_dict(blocks, strict=False)
    assert not unexpected and len(missing) == len(backbone.state_dict()) - len(blocks)
    inputs = processor(images=[Image.fromarray(e.image) for e in shapes.generate(3, seed=11)], return_tensors="pt")
    with torch.no_grad():
        hidden = backbone(**inputs).last_hidden_state
        features = torch.cat([hidden[:, 0], hidden[:, 1:].mean(1)], 1)
        expected = features @ trained["classifier.weight"].T + trained["classifier.bias"]
        assert torch.allclose(model(**inputs).logits, expected, atol=1e-4)


def test_training_labels_are_those_of_the_generated_images():
    # The trainer labels cached states without redrawing the images: check against the images themselves.
    labels = [shapes.LABELS[i] for i in train_image_top.label_ids(13)]
    assert labels == [e.label for e in shapes.generate(13, seed=4, split="train")]


@pytest.mark.parametrize("blocks", [1, 2, 3])
def test_training_path_on_cached_states_is_the_full_model(loaded, blocks):
    # The training script runs the frozen bottom once and trains on its output: bottom then top must be the model.
    model, processor = loaded
    first = model.config.num_hidden_layers - blocks
    pixels = processor(images=[Image.fromarray(e.image) for e in shapes.generate(2, seed=5)],
                       return_tensors="pt")["pixel_values"]
    with torch.no_grad():
        top = train_image_top.top_logits(model, train_image_top.bottom(model, pixels, first), first)
        assert torch.allclose(top, model(pixel_values=pixels).logits, atol=1e-4)


@pytest.fixture(scope="module")
def fresh_accuracy(loaded):
    model, processor = loaded
    examples = shapes.generate(100, seed=2024, split="test")  # not the seed used for training.json
    inputs = processor(images=[Image.fromarray(e.image) for e in examples], return_tensors="pt")
    with torch.no_grad():
        predicted = model(**inputs).logits.argmax(-1).tolist()
    return float(np.mean([model.config.id2label[p] == e.label for p, e in zip(predicted, examples)]))


@pytest.mark.slow
@pytest.mark.timeout(900)  # minutes under load: longer than the 300 s default
def test_accuracy_on_fresh_test_images_is_the_recorded_one(fresh_accuracy):
    recorded = _settings()["metrics"]["test_accuracy"]
    assert abs(fresh_accuracy - recorded) <= 0.07  # 100 images at ~0.95: binomial sd ~0.02


@pytest.mark.slow
def test_accuracy_reaches_the_target(fresh_accuracy):
    assert fresh_accuracy >= 0.95


@pytest.mark.slow
def test_changed_assets_are_rebuilt(built, monkeypatch, tmp_path):
    models, _, _ = built
    settings = tmp_path / "training.json"
    settings.write_text(SETTINGS_FILE.read_text() + "\n")  # same content, other bytes: the stamp must change
    monkeypatch.setattr(image_model, "SETTINGS_FILE", settings)
    monkeypatch.setenv("ROLLOUT_MODELS_DIR", str(models))
    assert "built" in image_model.build()
