"""Server settings read from ROLLOUT_* environment variables, each parsed by one function with one message.

`env_number` is what every reader in the core calls; `check_settings` parses them all at once, so the app
and the CLI can refuse a bad value at start-up with one message naming the variable and the value instead
of failing deep inside a page.
"""
from __future__ import annotations

import math
import os
from pathlib import Path

from rollout_core.errors import RolloutError


class SettingsError(RolloutError):
    """A ROLLOUT_* environment variable holds a value that cannot be used."""


def env_number(name: str, default: float, *, integer: bool = False, minimum: float = 0.0,
               inclusive: bool = True) -> float:
    """The number in env `name` (unset or blank: `default`), e.g. "2e9", "40_000_000" or "0.5".

    Raises `SettingsError` naming the variable and its value when it is not a finite number, is below
    `minimum` (or equal to it with `inclusive=False`), or is not whole when `integer` is set.
    """
    raw = os.environ.get(name, "").strip()
    if not raw:
        return int(default) if integer else float(default)
    try:
        value = float(raw)
    except ValueError:
        value = math.nan
    kind = "whole number" if integer else "number"
    bound = f"at least {minimum:g}" if inclusive else f"above {minimum:g}"
    if not math.isfinite(value) or (integer and value != int(value)) \
            or value < minimum or (not inclusive and value == minimum):
        raise SettingsError(f"server setting {name}={raw!r} is not a valid value: expected a {kind} {bound} "
                            f"(e.g. {default:g}); fix or unset it and restart")
    return int(value) if integer else value


def env_folder(name: str) -> Path | None:
    """The folder in env `name`, or None when unset; `SettingsError` when it names an existing non-folder."""
    raw = os.environ.get(name, "").strip()
    if not raw:
        return None
    path = Path(raw).expanduser()
    if path.exists() and not path.is_dir():
        raise SettingsError(f"server setting {name}={raw!r} is not a folder; fix or unset it and restart")
    return path


def env_folders(name: str) -> list[Path]:
    """The os.pathsep-separated folders in env `name` ([] when unset); `SettingsError` naming the first one that
    does not exist or is not a folder (a root that cannot hold models is a typo, not a restriction)."""
    folders = []
    for raw in os.environ.get(name, "").split(os.pathsep):
        if not raw.strip():
            continue
        path = Path(raw.strip()).expanduser()
        if not path.is_dir():
            problem = "is not a folder" if path.exists() else "does not exist"
            raise SettingsError(f"server setting {name}: {raw.strip()!r} {problem}; fix or unset it and restart")
        folders.append(path)
    return folders


def check_settings() -> None:
    """Parse every ROLLOUT_* setting; raise one `SettingsError` listing each bad one."""
    from rollout_core import lowmem
    from rollout_core.serving import budget, result_cache
    from rollout_core.inputs import images
    from rollout_core.models import loading, size

    problems = []
    for read in (size.max_params, loading.cache_size, images.max_image_pixels, lowmem.memory_budget_bytes,
                 result_cache.max_cache_bytes, budget.max_seconds, budget.max_heavy_jobs,
                 lambda: env_folder("ROLLOUT_MODELS_DIR"), lambda: env_folder("ROLLOUT_SPILL_DIR"), lambda: env_folders("ROLLOUT_ALLOWED_MODEL_ROOTS")):
        try:
            read()
        except SettingsError as err:
            problems.append(str(err))
    if problems:
        raise SettingsError("; ".join(problems))
