"""Setup step: the embedded "default-image" shapes classifier, assembled in seconds.

The model is the real pretrained DINOv2-small backbone (the `dinov2` setup step's folder) as a standard
`Dinov2ForImageClassification`: its ordinary classifier reads concat(CLS, mean of the patch tokens), so
rollout explains the "first+patch-mean" rows. Only that linear head was trained by the project
(`python -m rollout_core.build.train_image_head`, frozen backbone, generated shapes) and is committed
under `rollout_core/assets/image-head/`; this step merges it with the backbone weights and writes an
ordinary transformers folder to `models_dir() / "default-image"`: config.json (eager attention, the shape
labels), model.safetensors and a preprocessor config (PIL BitImageProcessor: the whole image resized to
the training resolution, no crop, ImageNet mean/std). The folder is loaded back with the Auto classes and
must reproduce the logits recorded at training time before it replaces an older one.
"""
from __future__ import annotations

import hashlib
import json
from pathlib import Path

from rollout_core.build import dinov2
from rollout_core.build.train_image_head import HEAD_FILE, SETTINGS_FILE, processor
from rollout_core.data import shapes
from rollout_core.build.staging import publish
from rollout_core.errors import ModelLoadError
from rollout_core.paths import models_dir

NAME = "default-image"
STAMP_FILE = "rollout-build-stamp.json"
TOLERANCE = 1e-3
_FORMAT = 1  # bump when the way the folder is assembled changes


def output_dir() -> Path:
    return models_dir() / NAME


def backbone_dir() -> Path:
    return models_dir() / dinov2.NAME


def _stamp() -> dict:
    """What the built folder depends on: the committed head's hashes, the backbone's own stamp, the format."""
    digest = hashlib.sha256()
    for path in (HEAD_FILE, SETTINGS_FILE):
        digest.update(path.read_bytes())
    backbone_stamp = hashlib.sha256((backbone_dir() / dinov2.STAMP).read_bytes()).hexdigest()
    return {"head_sha256": digest.hexdigest(), "backbone_stamp_sha256": backbone_stamp, "format": _FORMAT}


def _is_current(folder: Path, stamp: dict) -> bool:
    try:
        return json.loads((folder / STAMP_FILE).read_text()) == stamp and (folder / "model.safetensors").is_file()
    except (OSError, ValueError):
        return False


def classifier_config():
    """The backbone's Dinov2Config turned into a shapes classifier with eager attention."""
    from transformers import Dinov2Config

    config = Dinov2Config.from_pretrained(backbone_dir(), attn_implementation="eager")
    config.architectures = ["Dinov2ForImageClassification"]
    config.id2label = dict(enumerate(shapes.LABELS))
    config.label2id = {label: i for i, label in enumerate(shapes.LABELS)}
    return config


def _assemble(folder: Path, resolution: int) -> None:
    """Write config.json, model.safetensors (backbone under "dinov2." + the trained classifier) and the
    preprocessor config."""
    from safetensors.torch import load_file, save_file

    weights = {f"dinov2.{key}": value for key, value in load_file(backbone_dir() / "model.safetensors").items()}
    head = load_file(HEAD_FILE)
    if set(head) != {"classifier.weight", "classifier.bias"}:
        raise ModelLoadError(f"{HEAD_FILE} should hold classifier.weight and classifier.bias, not {sorted(head)}; "
                             f"rerun `python -m rollout_core.build.train_image_head`.")
    weights.update({key: value.float().contiguous() for key, value in head.items()})
    save_file(weights, folder / "model.safetensors", metadata={"format": "pt"})
    config = classifier_config().to_dict()
    config["attn_implementation"] = "eager"  # honoured by from_pretrained: attentions come back by default
    (folder / "config.json").write_text(json.dumps(config, indent=2, sort_keys=True) + "\n")
    processor(resolution).save_pretrained(folder)


def _verify(folder: Path, check: dict) -> None:
    """Load the folder with plain Auto classes, as any user would: a complete classifier, eager attention, and
    the logits recorded at training for a few test images reproduced (so the same predictions)."""
    import torch
    from PIL import Image
    from transformers import AutoImageProcessor, AutoModelForImageClassification

    model, info = AutoModelForImageClassification.from_pretrained(folder, output_loading_info=True)
    model.eval()
    problems = {k: v for k, v in info.items() if v}
    if type(model).__name__ != "Dinov2ForImageClassification" or problems:
        raise ModelLoadError(f"{folder}: expected a complete Dinov2ForImageClassification, got "
                             f"{type(model).__name__} {problems}")
    examples = shapes.generate(max(check["indices"]) + 1, seed=check["seed"], split=check["split"])
    examples = [examples[i] for i in check["indices"]]
    inputs = AutoImageProcessor.from_pretrained(folder)(images=[Image.fromarray(e.image) for e in examples],
                                                        return_tensors="pt")
    with torch.no_grad():
        out = model(**inputs, output_attentions=True)
    layers = model.config.num_hidden_layers
    if model.config._attn_implementation != "eager" or len(out.attentions or ()) != layers:
        raise ModelLoadError(f"{folder}: expected eager attention with {layers} attention maps.")
    difference = float((out.logits - torch.tensor(check["logits"])).abs().max())
    if difference > TOLERANCE:
        raise ModelLoadError(f"{folder}: logits differ from those recorded at training by {difference:.2e}; "
                             f"the assembled weights or preprocessing are wrong.")


def build(force: bool = False) -> str:
    """Build models_dir()/"default-image" unless it is present and current; return a one-line status."""
    if not HEAD_FILE.exists():
        raise ModelLoadError(f"{HEAD_FILE} is missing: run `python -m rollout_core.build.train_image_head`.")
    if not (backbone_dir() / dinov2.STAMP).is_file():
        dinov2.build()
    settings = json.loads(SETTINGS_FILE.read_text())
    metrics = settings["metrics"]
    folder = output_dir()
    stamp = _stamp()
    if not force and _is_current(folder, stamp):
        return f"{NAME}: up to date ({folder})"
    def fill(staging: Path) -> None:
        _assemble(staging, metrics["resolution"])
        _verify(staging, metrics["check"])
        (staging / STAMP_FILE).write_text(json.dumps(stamp, indent=2) + "\n")

    publish(folder, fill)
    return (f"{NAME}: built {folder} (DINOv2-small + trained shapes head at {metrics['resolution']} px; "
            f"test accuracy {metrics['test_accuracy']:.1%})")
