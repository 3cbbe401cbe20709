"""Setup step: the embedded "default-image" shapes classifier, assembled in seconds.

The model is the real pretrained DINOv2-small backbone (the `dinov2` setup step's folder) as a standard
`Dinov2ForImageClassification`: its ordinary classifier reads concat(CLS, mean of the patch tokens), so
rollout explains the "first+patch-mean" rows. The project fine-tuned only the top encoder blocks, the final
layernorm and that classifier (`python -m training.train_image_top`, generated shapes); those
parameters are committed (fp16) under `rollout_core/assets/image-top/`. This step merges them over the
backbone weights and writes an ordinary transformers folder to `models_dir() / "default-image"`:
config.json (eager attention, the shape labels), model.safetensors and a preprocessor config (PIL
BitImageProcessor: the whole image resized to the training resolution, no crop, ImageNet mean/std). The
folder is loaded back with the Auto classes and must reproduce the logits recorded at training time before
it replaces an older one.
"""
from __future__ import annotations

import hashlib
import json
from pathlib import Path

from rollout_core.build import dinov2
from rollout_core.build.staging import publish
from rollout_core.data import shapes
from rollout_core.errors import ModelLoadError
from rollout_core.paths import ASSETS_DIR, models_dir

NAME = "default-image"
ASSET_DIR = ASSETS_DIR / "image-top"
TRAINED_FILE = ASSET_DIR / "trained.safetensors"
SETTINGS_FILE = ASSET_DIR / "training.json"
STAMP_FILE = "rollout-build-stamp.json"
TOLERANCE = 1e-3
_FORMAT = 2  # bump when the way the folder is assembled changes
_TRAIN_HINT = "run `python -m training.train_image_top`"


def output_dir() -> Path:
    return models_dir() / NAME


def backbone_dir() -> Path:
    return models_dir() / dinov2.NAME


def processor(resolution: int):
    """The PIL/numpy image processor of the built folder: whole image resized to a square, no crop."""
    from PIL import Image
    from transformers import BitImageProcessorPil

    return BitImageProcessorPil(
        do_resize=True, size={"height": resolution, "width": resolution}, resample=Image.BICUBIC,
        do_center_crop=False, do_rescale=True, rescale_factor=1 / 255, do_normalize=True,
        image_mean=dinov2.IMAGENET_MEAN, image_std=dinov2.IMAGENET_STD, do_convert_rgb=True,
    )


def base_classifier():
    """Dinov2ForImageClassification with the backbone folder's weights and a freshly initialised classifier
    (drawn from torch's global generator: seed it first for a reproducible start)."""
    from transformers import Dinov2ForImageClassification
    from transformers.utils import logging

    previous = logging.get_verbosity()
    logging.set_verbosity_error()  # its load report would tell users to train the classifier: checked below
    try:
        model, info = Dinov2ForImageClassification.from_pretrained(backbone_dir(), config=classifier_config(),
                                                                   output_loading_info=True)
    finally:
        logging.set_verbosity(previous)
    problems = {k: sorted(v) for k, v in info.items() if v and k != "missing_keys"}
    if problems or set(info["missing_keys"]) != {"classifier.weight", "classifier.bias"}:
        raise ModelLoadError(f"{backbone_dir()} does not fit a DINOv2 classifier ({info}); "
                             f"run `python -m rollout_core setup --force`.")
    return model.eval()


def _stamp() -> dict:
    """What the built folder depends on: the committed assets' hashes, the backbone's own stamp, the format."""
    digest = hashlib.sha256()
    for path in (TRAINED_FILE, SETTINGS_FILE):
        digest.update(path.read_bytes())
    backbone_stamp = hashlib.sha256((backbone_dir() / dinov2.STAMP).read_bytes()).hexdigest()
    return {"assets_sha256": digest.hexdigest(), "backbone_stamp_sha256": backbone_stamp, "format": _FORMAT}


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
    """Write config.json, model.safetensors (backbone weights with the trained ones loaded over them) and
    the preprocessor config."""
    import torch
    from safetensors.torch import load_file

    trained = load_file(TRAINED_FILE)
    model = base_classifier()
    missing, unexpected = model.load_state_dict({k: v.float() for k, v in trained.items()}, strict=False)
    if unexpected or not {"classifier.weight", "classifier.bias"} <= set(trained):
        raise ModelLoadError(f"{TRAINED_FILE} does not fit the backbone (unknown {unexpected[:3]}, or no "
                             f"classifier); {_TRAIN_HINT}.")
    with torch.no_grad():
        model.save_pretrained(folder)
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
    if not TRAINED_FILE.exists():
        raise ModelLoadError(f"{TRAINED_FILE} is missing: {_TRAIN_HINT}.")
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
    return (f"{NAME}: built {folder} (DINOv2-small, top blocks fine-tuned on shapes, at {metrics['resolution']} px; "
            f"test accuracy {metrics['test_accuracy']:.1%})")
