"""Which folder a model name means, and whether it is safe to load from.

- a registry name is its embedded folder (built by the setup step) or its hub id;
- a local folder must lie under one of the roots in env `ROLLOUT_ALLOWED_MODEL_ROOTS` (os.pathsep-separated;
  unset or empty = no restriction), and so must every file in it (symlinks). Under roots, a name whose absolute
  form (without following links) is outside them is refused, or taken as a hub id when shaped like one, before
  the file system is asked anything: the answer never depends on what exists on the server;
- a hub id comes from the local cache first, then the hub; no network -> `ModelLoadError` at once;
- weights: safetensors; pickle files need `allow_pickle=True` (then a `PickleWeightsWarning`); custom code
  (`auto_map`, an architecture transformers does not know) needs `trust_remote_code=True`.
"""
from __future__ import annotations

import dataclasses
import json
import os
import re
import warnings
from pathlib import Path
from typing import Any

from rollout_core import settings
from rollout_core.errors import ModelLoadError, SecurityError
from rollout_core.extras import install_command
from rollout_core.models import registry
from rollout_core.models.build import TRANSFORMERS_LOCK

PICKLE_SUFFIXES = (".bin", ".pt", ".pth", ".ckpt", ".pkl")
MAX_SETTINGS_FILE = 8 * 1024 * 1024
"""Bytes of a JSON settings file of a model folder (config.json, tokenizer_config.json, ...): published ones are
kilobytes (a 21,843-class ImageNet config is about 0.7 MB); parsing a file of hundreds of MB takes GBs."""
MAX_TOKENIZER_FILE = 64 * 1024 * 1024
"""Bytes of a tokenizer's vocabulary file (tokenizer.json, vocab.json, vocab.txt, merges.txt, *.model):
the largest published ones are about 35 MB."""
_TOKENIZER_FILES = ("tokenizer.json", "vocab.json", "vocab.txt", "merges.txt")
_READ_SUFFIXES = (".json", ".txt", ".model", ".tiktoken")
NO_NETWORK = "no network: choose an embedded model or a local folder"
_HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*(/[\w.-]+)?$")
_NOT_HUB = re.compile(r"\.\.|--|/\.|\.$|\./|-$")  # what the hub's own repo-id check forbids (no `..`, `--`, ...)
_HUB_FILES = ["*.json", "*.txt", "*.model", "*.safetensors", "*.tiktoken"]


class PickleWeightsWarning(UserWarning):
    """Pickle weights were loaded because the caller allowed it."""


@dataclasses.dataclass(frozen=True)
class Resolved:
    """The local folder of a model name and its registry entry (None for folders and plain hub ids)."""

    folder: Path
    entry: registry.RegistryEntry | None


def allowed_roots() -> list[Path]:
    """Roots local model folders must lie under (env ROLLOUT_ALLOWED_MODEL_ROOTS); [] = anywhere."""
    raw = settings.text("ROLLOUT_ALLOWED_MODEL_ROOTS")  # leniently here; check_settings refuses a missing root
    return [Path(p).expanduser().resolve() for p in raw.split(os.pathsep) if p.strip()]


# ----------------------------------------------------------------------------------------------
# Resolving a name to a folder


def resolve(name: str, *, allow_pickle: bool) -> Resolved:
    """The folder `name` stands for: an embedded registry model, a local folder or a hub snapshot."""
    entry = registry.lookup(name)
    if entry is not None and entry.embedded:
        folder = Path(entry.source())
        if not (folder / "config.json").is_file():
            if entry.package_extra:
                raise ModelLoadError(f"the embedded model {name!r} ships in a Python package that is not installed: "
                                     f"{install_command(entry.package_extra)}")
            hint = registry.SETUP_HINT if entry.built_by_setup else "reinstall the project (`bash scripts/install.sh`)"
            raise ModelLoadError(f"the embedded model {name!r} is not built yet ({folder}): {hint}")
        return Resolved(folder, entry)
    hub_shaped = not name.startswith(("/", ".", "~")) and "\\" not in name and _HUB_ID.match(name) is not None \
        and _NOT_HUB.search(name) is None
    try:
        path = Path(name).expanduser()
        if (entry is None and not hub_shaped) or (_may_look(path) and path.exists()):
            return Resolved(_local_folder(path, name), None)
    # ~nosuchuser/x (no such home folder), a NUL character, a name part longer than the file system allows
    except (RuntimeError, ValueError, OSError) as err:
        detail = getattr(err, "strerror", None) or str(err)
        raise ModelLoadError(f"cannot use {name!r} as a model folder: {detail}") from None
    if entry is not None:
        return Resolved(_from_hub(entry.source(), allow_pickle=allow_pickle), entry)
    return Resolved(_from_hub(name, allow_pickle=allow_pickle), None)


def _may_look(path: Path) -> bool:
    """Whether the file system may be asked about `path`: no roots, or its absolute form (`..` removed, links
    not followed) lies under one as written or as resolved."""
    roots = allowed_roots()
    if not roots:
        return True
    written = [Path(os.path.abspath(Path(p).expanduser()))
               for p in os.environ.get("ROLLOUT_ALLOWED_MODEL_ROOTS", "").split(os.pathsep) if p.strip()]
    lexical = Path(os.path.abspath(path))
    return any(lexical.is_relative_to(root) for root in roots + written)


def _local_folder(path: Path, name: str) -> Path:
    """The real folder `path` names. Under allowed roots, a path outside them is refused before anything else is
    said of it, with one message for every such path: a visitor learns neither whether it exists or is a file
    nor where the roots are. Files inside the folder must lie under the roots too (symlinks)."""
    roots = allowed_roots()

    def inside(target: Path) -> bool:
        return not roots or any(target.is_relative_to(root) for root in roots)

    outside = SecurityError(f"the model folder {name} is outside the allowed model folders "
                            "(server setting ROLLOUT_ALLOWED_MODEL_ROOTS)")
    if not _may_look(path):  # decided on the name alone: nothing on disk is looked at
        raise outside
    real = path.resolve()
    if not inside(real):
        raise outside
    if not path.exists():
        raise ModelLoadError(f"no such model folder: {name}")
    if not path.is_dir():
        raise ModelLoadError(f"{name} is a file; give the folder that holds config.json and the weights")
    if roots and not all(inside(f.resolve()) for f in real.rglob("*")):
        raise outside
    return real


def _from_hub(repo_id: str, *, allow_pickle: bool) -> Path:
    """A local snapshot of a hub repository: from the cache if it is there, else downloaded."""
    import huggingface_hub as hub
    from huggingface_hub import errors as hub_errors

    patterns = _HUB_FILES + (["*" + s for s in PICKLE_SUFFIXES] if allow_pickle else [])
    try:
        return Path(hub.snapshot_download(repo_id, allow_patterns=patterns, local_files_only=True))
    except Exception:  # not cached (or partly): ask the hub
        pass
    if os.environ.get("HF_HUB_OFFLINE", "").strip().lower() in ("1", "true", "yes", "on"):
        raise ModelLoadError(f"{NO_NETWORK} ({repo_id!r} is not in the local cache and HF_HUB_OFFLINE is set)")
    try:
        info = hub.model_info(repo_id, timeout=10)
    except (hub_errors.RepositoryNotFoundError, hub_errors.GatedRepoError) as err:
        raise ModelLoadError(f"no accessible model {repo_id!r} on the Hugging Face hub ({type(err).__name__})") from err
    except Exception as err:  # connection refused, DNS failure, timeout, offline mode
        raise ModelLoadError(f"{NO_NETWORK} (could not reach the Hugging Face hub for {repo_id!r})") from err
    files = [s.rfilename for s in info.siblings or []]
    if not any(f.endswith(".safetensors") for f in files) and any(f.endswith(PICKLE_SUFFIXES) for f in files):
        raise SecurityError(_pickle_message(repo_id))
    try:
        return Path(hub.snapshot_download(repo_id, allow_patterns=patterns, etag_timeout=10))
    except Exception as err:
        raise ModelLoadError(f"downloading {repo_id!r} from the Hugging Face hub failed: {err}") from err


# ----------------------------------------------------------------------------------------------
# Security checks on a folder


def _pickle_message(where: str) -> str:
    return (
        f"{where} has only pickle weights (.bin/.pt/.pth), which can run arbitrary code when loaded; refused. "
        "Use a safetensors copy, or allow pickle explicitly (--allow-pickle / allow_pickle=True) "
        "if you trust the source."
    )


def check_folder(folder: Path, *, allow_pickle: bool, trust_remote_code: bool) -> dict[str, Any]:
    """Read config.json and apply the size, weight-format and remote-code rules; return the config dict."""
    config_file = folder / "config.json"
    if not config_file.is_file():
        raise ModelLoadError(f"{folder} is not a transformers model folder (no config.json)")
    _check_file_sizes(folder)
    try:
        config = json.loads(config_file.read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError) as err:
        raise ModelLoadError(f"{config_file} is not readable JSON: {err}") from err
    if not isinstance(config, dict):
        raise ModelLoadError(f"{config_file} does not hold a JSON object")
    if not trust_remote_code:
        custom = _custom_code_reason(folder, config)
        if custom:
            raise SecurityError(
                f"the model in {folder} needs custom code ({custom}); custom code from a model repository can "
                "do anything on this machine, so it is refused. Pass trust_remote_code=True only if you trust it."
            )
    names = [p.name for p in folder.iterdir() if p.is_file()]
    if not any(n.endswith(".safetensors") for n in names):
        pickles = [n for n in names if n.endswith(PICKLE_SUFFIXES)]
        if not pickles:
            raise ModelLoadError(f"{folder} holds no weights (no .safetensors file)")
        if not allow_pickle:
            raise SecurityError(_pickle_message(str(folder)))
        warnings.warn(
            f"loading pickle weights from {folder} ({', '.join(sorted(pickles))}) because allow_pickle is set: "
            "pickle files can run arbitrary code; prefer safetensors",
            PickleWeightsWarning,
            stacklevel=3,
        )
    return config


def _check_file_sizes(folder: Path) -> None:
    """Refuse a folder whose settings or tokenizer files are larger than any real model's, before one is read."""
    for entry in os.scandir(folder):
        if not entry.name.endswith(_READ_SUFFIXES) or not entry.is_file():
            continue
        tokenizer = entry.name in _TOKENIZER_FILES or not entry.name.endswith(".json")
        cap = MAX_TOKENIZER_FILE if tokenizer else MAX_SETTINGS_FILE
        found = entry.stat().st_size
        if found > cap:
            what = "tokenizer file" if tokenizer else "settings file"
            raise ModelLoadError(f"{entry.name} in {folder} is {found / 2**20:,.1f} MB; a model's {what} is at most "
                                 f"{cap // 2**20} MB here, so it is not read")


def _custom_code_reason(folder: Path, config: dict[str, Any]) -> str | None:
    with TRANSFORMERS_LOCK:
        from transformers import CONFIG_MAPPING

    if config.get("auto_map"):
        return "the config has an auto_map pointing at Python files"
    model_type = config.get("model_type")
    if not model_type:
        return "the config names no model_type"
    if model_type not in CONFIG_MAPPING:
        return f"model_type {model_type!r} is not part of transformers"
    tok = folder / "tokenizer_config.json"
    if tok.is_file():
        try:
            if json.loads(tok.read_text(encoding="utf-8")).get("auto_map"):
                return "the tokenizer config has an auto_map pointing at Python files"
        except (ValueError, RecursionError, AttributeError):
            return None
    return None
