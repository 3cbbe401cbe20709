"""Model size and weight-match checks for `load_model`: a folder is refused before any real allocation when its
config declares more parameters than the server allows or than its safetensors files hold (their headers say
without loading them), and after loading when its weights do not match it.

Setting: env `ROLLOUT_MAX_MODEL_PARAMS` (default 2e9; a number such as 2e9 or 2000000000)."""
from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Any

import torch

from rollout_core.errors import ModelLoadError, SecurityError
from rollout_core import settings

MAX_LAYERS = 512
"""More layers than this is refused from the config alone (building even empty modules for them takes minutes)."""
_TOLERATED_MISSING = re.compile(r"(^|\.)(pooler|mask_token|position_ids|position_embeddings\.position_ids)(\.|$)")
"""Weights a checkpoint may lack without changing what is explained: a pooler not saved with an encoder, DINOv2's
mask token (only used for masked training), buffers."""


def max_params() -> int:
    """The largest parameter count a model may declare: env ROLLOUT_MAX_MODEL_PARAMS (default 2e9)."""
    return int(settings.number("ROLLOUT_MAX_MODEL_PARAMS"))


def declared_params(cls: Any, config: Any, folder: Path | None = None) -> int:
    """Parameter count of `cls` built from `config` on the meta device (no memory for the weights).

    A lower bound (the token embeddings, vocab x hidden, and layers x 4 x hidden^2: the query, key, value and
    output projections) is checked first, so an absurd config is refused without building even the meta modules.
    With `folder`, the meta model's weights are also checked against what the folder's safetensors files hold
    (`check_stored_weights`), so a config that does not fit its files is refused before the model is allocated."""
    limit = max_params()
    layers, hidden, vocab = _int(config, "num_hidden_layers"), _int(config, "hidden_size"), _int(config, "vocab_size")
    if layers > MAX_LAYERS:
        raise SecurityError(f"model refused: its config declares {layers:,} layers; the limit is {MAX_LAYERS} "
                            "(the deepest published transformers have about 130)")
    floor = layers * 4 * hidden * hidden + vocab * hidden
    if floor > limit:
        raise SecurityError(_too_big(f"at least {floor:,}", limit))
    build = getattr(cls, "from_config", None) or cls._from_config
    with torch.device("meta"):
        model = build(config)
    count = sum(p.numel() for p in model.parameters())
    if count > limit:
        raise SecurityError(_too_big(f"{count:,}", limit))
    if folder is not None:
        check_stored_weights(model, folder)
    return count


def check_stored_weights(model: torch.nn.Module, folder: Path) -> None:
    """Refuse, before allocation, a model (on the meta device) whose weights cannot come from the folder's
    safetensors files: a weight of the same name (with or without the model's prefix) of another shape, or more
    parameters than the files hold in all (beyond the weights a checkpoint may lack). Folders with pickle weights
    only are left to the check after loading (their shapes are not known without unpickling)."""
    stored = stored_shapes(folder)
    if stored is None:
        return
    prefix = getattr(model, "base_model_prefix", "") or ""
    named = {_bare(name, prefix): (name, tuple(p.shape)) for name, p in model.named_parameters()}
    files = {_bare(name, prefix): shape for name, shape in stored.items()}
    mismatched = [(full, files[bare], shape) for bare, (full, shape) in named.items()
                  if bare in files and files[bare] != shape]
    if mismatched:
        name, found, expected = mismatched[0]
        raise ModelLoadError(f"{len(mismatched)} weights in {folder} have shapes that do not fit its config (first: "
                             f"{name} is {found} in the files, {expected} by the config)")
    tolerated = sum(p.numel() for name, p in model.named_parameters() if _TOLERATED_MISSING.search(name))
    declared = sum(p.numel() for p in model.parameters())
    held = sum(math.prod(shape) for shape in stored.values())
    if declared - tolerated > held:
        raise ModelLoadError(f"the config in {folder} declares {declared:,} parameters but its weight files hold "
                             f"{held:,} (in {len(stored)} weights): the weights do not match its config, so the model "
                             "would be partly random")


def stored_shapes(folder: Path) -> dict[str, tuple[int, ...]] | None:
    """Every tensor's shape in the folder's safetensors files, read from their headers (nothing is loaded);
    None when the folder has none."""
    from safetensors import safe_open

    files = sorted(Path(folder).glob("*.safetensors"))
    if not files:
        return None
    shapes: dict[str, tuple[int, ...]] = {}
    for file in files:
        with safe_open(str(file), framework="pt") as weights:
            for key in weights.keys():
                shapes[key] = tuple(weights.get_slice(key).get_shape())
    return shapes


def _bare(name: str, prefix: str) -> str:
    return name[len(prefix) + 1:] if prefix and name.startswith(prefix + ".") else name


def check_weights_match(info: dict[str, Any], model: torch.nn.Module, folder: object) -> None:
    """Refuse a load whose checkpoint lacks weights of the model, except tolerated ones, or has weights of other
    shapes than its config gives (either would be left random)."""
    mismatched = list(info.get("mismatched_keys") or [])
    if mismatched:
        key, found, expected = mismatched[0]
        raise ModelLoadError(f"{len(mismatched)} weights in {folder} have shapes that do not fit its config (first: "
                             f"{key} is {tuple(found)} in the files, {tuple(expected)} by the config)")
    missing = [k for k in info.get("missing_keys") or [] if not _TOLERATED_MISSING.search(k)]
    if missing:
        total = len(model.state_dict())
        unexpected = len(info.get("unexpected_keys") or [])
        extra = f" ({unexpected} weights in the files belong to no part of it)" if unexpected else ""
        raise ModelLoadError(f"{len(missing)} of {total} weights missing: the weights in {folder} do not match its "
                             f"config{extra}, so the model would be partly random (first missing: {missing[0]})")


def _int(config: Any, name: str) -> int:
    value = getattr(config, name, None)
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


def _too_big(count: str, limit: int) -> str:
    return (f"model refused: its config declares {count} parameters, above the server's limit of {limit:,} "
            "(setting ROLLOUT_MAX_MODEL_PARAMS)")
