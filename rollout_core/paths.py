"""Where the project keeps models it builds and files it ships."""
from __future__ import annotations

import os
from pathlib import Path

from rollout_core import settings

PACKAGE_DIR = Path(__file__).resolve().parent
ASSETS_DIR = PACKAGE_DIR / "assets"
"""Small files committed with the code (trained heads, tiny models, example inputs)."""


def models_dir() -> Path:
    """Folder for models built by `python -m rollout_core setup`.

    `ROLLOUT_MODELS_DIR` overrides it; the default is a per-user cache, so clean clones on one
    machine share the built models and a new machine builds them once.
    """
    env = settings.folder("ROLLOUT_MODELS_DIR")
    if env is not None:
        return env
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "rollout-dashboard" / "models"


def corpus_dir() -> Path:
    """Folder whose result folders the Corpus page may open (`ROLLOUT_CORPUS_DIR`, default a per-user cache).

    The page never opens a path typed by a visitor: only result folders directly inside this one.
    """
    env = settings.folder("ROLLOUT_CORPUS_DIR")
    if env is not None:
        return env
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "rollout-dashboard" / "corpus"
