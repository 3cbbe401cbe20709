"""`load_model`: registry name, local folder or hub id -> a cached `ModelHandle`.

Rules (the same for the Python API, the CLI and the pages), each kept where it is applied:
- which folder a name means, the allowed roots, pickle weights and custom code: `folders`;
- building the model (eager attention, size checks, processor): `build`;
- handles are kept in a least-recently-used cache (`rollout_core.lru.LRUCache`) of env `ROLLOUT_MODEL_CACHE_SIZE`
  entries (default 3); two threads asking for the same model at once load it once. The security checks run on every
  call, also for cached models.
"""
from __future__ import annotations

import dataclasses
import os
from pathlib import Path

import torch

from rollout_core import settings
from rollout_core.errors import ModelLoadError
from rollout_core.lru import LRUCache
from rollout_core.models import families
from rollout_core.models.build import TRANSFORMERS_LOCK, device_for, infer_task, load_folder
from rollout_core.models.folders import (NO_NETWORK, PICKLE_SUFFIXES, PickleWeightsWarning, allowed_roots,
                                         check_folder, resolve)
from rollout_core.models.handle import ModelHandle

__all__ = ["NO_NETWORK", "PICKLE_SUFFIXES", "PickleWeightsWarning", "TASKS", "allowed_roots", "cache_size",
           "cached_names", "clear_cache", "infer_task", "load_model"]

TASKS = tuple(families.TASK_MODALITY)
MAX_NAME_LENGTH = 255


# ----------------------------------------------------------------------------------------------
# Public API


def load_model(
    name: str | os.PathLike[str],
    *,
    device: str | torch.device | None = None,
    allow_pickle: bool = False,
    trust_remote_code: bool = False,
    task: str | None = None,
) -> ModelHandle:
    """Load (or take from the cache) the model `name`: a registry name, a local folder or a hub id."""
    if isinstance(name, os.PathLike):
        name = os.fspath(name)
    if not isinstance(name, str) or not name.strip():
        raise ModelLoadError("no model given: name a registry model, a local folder or a hub id")
    name = name.strip()
    if len(name) > MAX_NAME_LENGTH:
        raise ModelLoadError(f"the model name is {len(name)} characters long; a hub id or folder has at most "
                             f"{MAX_NAME_LENGTH}")
    if task is not None and task not in TASKS:
        raise ModelLoadError(f"unknown task {task!r}; choose one of: {', '.join(TASKS)}")
    target = device_for(device)
    resolved = resolve(name, allow_pickle=allow_pickle)
    config_dict = check_folder(resolved.folder, allow_pickle=allow_pickle, trust_remote_code=trust_remote_code)
    if task is None and resolved.entry is not None and resolved.entry.embedded:
        task = resolved.entry.task
    key = (str(resolved.folder), str(target), task, trust_remote_code, _folder_stamp(resolved.folder))

    def build() -> ModelHandle:
        with TRANSFORMERS_LOCK:
            return load_folder(resolved.folder, config_dict, target, task, allow_pickle, trust_remote_code)

    handle = _CACHE.get_or_compute(key, build)
    return handle if handle.name == name else dataclasses.replace(handle, name=name)


def _folder_stamp(folder: Path) -> tuple:
    """The folder's files (name, size, modification time): a model rebuilt or replaced in place is loaded again,
    not served stale from the cache (a long-lived app or warm CLI server outlives the files it loaded)."""
    try:
        return tuple(sorted((e.name, *_size_and_time(e)) for e in os.scandir(folder) if e.is_file()))
    except OSError:
        return ()


def _size_and_time(entry: os.DirEntry) -> tuple[int, int]:
    info = entry.stat()
    return info.st_size, info.st_mtime_ns


def cached_names() -> list[str]:
    """The folders of the loaded models, most recently used last."""
    return [key[0] for key in _CACHE.keys()]


def clear_cache() -> None:
    """Forget every cached handle (tests; freeing memory)."""
    _CACHE.clear()


def cache_size() -> int:
    """Capacity of the handle cache: env ROLLOUT_MODEL_CACHE_SIZE (default 3, at least 1)."""
    return int(settings.number("ROLLOUT_MODEL_CACHE_SIZE"))


_CACHE = LRUCache(max_items=cache_size)
"""The loaded handles, least recently used out first; one load per model across threads."""
