"""Model size and weight-match checks for `load_model`: a folder is refused before any real allocation when its
config declares more parameters than the server allows, and after loading when its weights do not match it.

Setting: env `ROLLOUT_MAX_MODEL_PARAMS` (default 2e9; a number such as 2e9 or 2000000000)."""
from __future__ import annotations

import re
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


def declared_params(cls: Any, config: Any) -> int:
    """Parameter count of `cls` built from `config` on the meta device (no memory for the weights).

    A lower bound (layers x 4 x hidden^2: the query, key, value and output projections) is checked first, so an
    absurd config is refused without building even the meta modules."""
    limit = max_params()
    layers, hidden = _int(config, "num_hidden_layers"), _int(config, "hidden_size")
    if layers > MAX_LAYERS:
        raise SecurityError(f"model refused: its config declares {layers:,} layers; the limit is {MAX_LAYERS} "
                            "(the deepest published transformers have about 130)")
    if layers and hidden and layers * 4 * hidden * hidden > limit:
        raise SecurityError(_too_big(f"at least {layers * 4 * hidden * hidden:,}", limit))
    build = getattr(cls, "from_config", None) or cls._from_config
    with torch.device("meta"):
        model = build(config)
    count = sum(p.numel() for p in model.parameters())
    if count > limit:
        raise SecurityError(_too_big(f"{count:,}", limit))
    return count


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
