"""`load_model`: registry name, local folder or hub id -> a cached `ModelHandle`.

Rules (the same for the Python API, the CLI and the pages):
- attention is always eager (SDPA and flash attention return no attention weights);
- weights: safetensors; pickle files (.bin, .pt, .pth, .ckpt, .pkl) can run code when loaded and are
  refused with `SecurityError` unless `allow_pickle=True` (then a `PickleWeightsWarning` is issued);
- custom code (`auto_map` in the config, or an architecture transformers does not know) is refused unless
  `trust_remote_code=True` is passed explicitly;
- local folders must lie under one of the roots in env `ROLLOUT_ALLOWED_MODEL_ROOTS` (os.pathsep-separated;
  unset or empty = no restriction). Registry models and hub downloads are not local folders;
- hub ids: the local cache first, then the hub; no network -> `ModelLoadError` at once, never a hang;
- handles are kept in a least-recently-used cache of env `ROLLOUT_MODEL_CACHE_SIZE` entries (default 3);
  two threads asking for the same model at once load it once. The security checks run on every call,
  also for cached models.
"""
from __future__ import annotations

import dataclasses
import json
import os
import pickle
import re
import threading
import warnings
from collections import OrderedDict
from pathlib import Path
from typing import Any

import torch

from huggingface_hub.errors import StrictDataclassFieldValidationError
from safetensors import SafetensorError

from rollout_core.errors import ModelLoadError, SecurityError
from rollout_core.models import families, registry, size
from rollout_core.models.handle import ModelHandle

TASKS = tuple(families.TASK_MODALITY)
PICKLE_SUFFIXES = (".bin", ".pt", ".pth", ".ckpt", ".pkl")
NO_NETWORK = "no network: choose an embedded model or a local folder"
DEFAULT_CACHE_SIZE = 3
MAX_NAME_LENGTH = 255
_BROKEN_FILES = (OSError, ValueError, KeyError, TypeError, RuntimeError, AttributeError, pickle.UnpicklingError,
                 SafetensorError, StrictDataclassFieldValidationError)
"""What a broken, truncated, lying or too deeply nested model file raises while transformers reads it
(RecursionError is a RuntimeError; a config value of the wrong type fails the config's field validation)."""

_AUTO_CLASS = {
    "text-classification": "AutoModelForSequenceClassification",
    "text-encoder": "AutoModel",
    "sentence-encoder": "AutoModel",
    "causal-lm": "AutoModelForCausalLM",
    "seq2seq": "AutoModelForSeq2SeqLM",
    "image-classification": "AutoModelForImageClassification",
    "image-backbone": "AutoModel",
}
_HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*(/[\w.-]+)?$")
_HUB_FILES = ["*.json", "*.txt", "*.model", "*.safetensors", "*.tiktoken"]


class PickleWeightsWarning(UserWarning):
    """Pickle weights were loaded because the caller allowed it."""


@dataclasses.dataclass(frozen=True)
class _Resolved:
    folder: Path
    entry: registry.RegistryEntry | None


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
    target = _device(device)
    resolved = _resolve(name, allow_pickle=allow_pickle)
    config_dict = _check_folder(resolved.folder, allow_pickle=allow_pickle, trust_remote_code=trust_remote_code)
    if task is None and resolved.entry is not None and resolved.entry.embedded:
        task = resolved.entry.task
    key = (str(resolved.folder), str(target), task, trust_remote_code)
    handle = _CACHE.get_or_load(
        key, lambda: _load(resolved.folder, config_dict, target, task, allow_pickle, trust_remote_code)
    )
    return handle if handle.name == name else dataclasses.replace(handle, name=name)


def clear_cache() -> None:
    """Forget every cached handle (tests; freeing memory)."""
    _CACHE.clear()


def cache_size() -> int:
    """Capacity of the handle cache: env ROLLOUT_MODEL_CACHE_SIZE (default 3, at least 1)."""
    raw = os.environ.get("ROLLOUT_MODEL_CACHE_SIZE", "").strip()
    try:
        return max(1, int(raw)) if raw else DEFAULT_CACHE_SIZE
    except ValueError:
        return DEFAULT_CACHE_SIZE


def allowed_roots() -> list[Path]:
    """Roots local model folders must lie under (env ROLLOUT_ALLOWED_MODEL_ROOTS); [] = anywhere."""
    raw = os.environ.get("ROLLOUT_ALLOWED_MODEL_ROOTS", "")
    return [Path(p).expanduser().resolve() for p in raw.split(os.pathsep) if p.strip()]


# ----------------------------------------------------------------------------------------------
# The cache


_TRANSFORMERS_LOCK = threading.RLock()
"""Serialises the code that first touches transformers' lazily imported modules (configs, model classes):
two threads doing it at once race inside transformers ("cannot import name 'CONFIG_MAPPING'"). Cache hits
do not take it; loads of different models run one after the other."""


class _HandleCache:
    """Thread-safe LRU of handles with one lock per key, so concurrent requests load a model once."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._items: OrderedDict[tuple, ModelHandle] = OrderedDict()
        self._key_locks: dict[tuple, threading.Lock] = {}

    def get_or_load(self, key: tuple, load: Any) -> ModelHandle:
        with self._lock:
            if key in self._items:
                self._items.move_to_end(key)
                return self._items[key]
            key_lock = self._key_locks.setdefault(key, threading.Lock())
        with key_lock:
            with self._lock:
                if key in self._items:  # another thread loaded it while we waited
                    self._items.move_to_end(key)
                    return self._items[key]
            with _TRANSFORMERS_LOCK:
                handle = load()
            with self._lock:
                self._items[key] = handle
                self._items.move_to_end(key)
                while len(self._items) > cache_size():
                    self._items.popitem(last=False)
                self._key_locks.pop(key, None)
            return handle

    def keys(self) -> list[tuple]:
        with self._lock:
            return list(self._items)

    def clear(self) -> None:
        with self._lock:
            self._items.clear()


_CACHE = _HandleCache()


# ----------------------------------------------------------------------------------------------
# Resolving a name to a folder


def _resolve(name: str, *, allow_pickle: bool) -> _Resolved:
    entry = registry.lookup(name)
    if entry is not None and entry.embedded:
        folder = Path(entry.source())
        if not (folder / "config.json").is_file():
            hint = registry.SETUP_HINT if entry.built_by_setup else "reinstall the project (`bash scripts/install.sh`)"
            raise ModelLoadError(f"the embedded model {name!r} is not built yet ({folder}): {hint}")
        return _Resolved(folder, entry)
    try:
        path = Path(name).expanduser()
    except RuntimeError:  # ~nosuchuser/x: no such home folder
        raise ModelLoadError(f"no such model folder: {name}") from None
    if path.exists():
        if not path.is_dir():
            raise ModelLoadError(f"{name} is a file; give the folder that holds config.json and the weights")
        return _Resolved(_check_root(path), None)
    if entry is not None:
        return _Resolved(_from_hub(entry.source(), allow_pickle=allow_pickle), entry)
    if name.startswith(("/", ".", "~")) or "\\" in name or not _HUB_ID.match(name):
        raise ModelLoadError(f"no such model folder: {name}")
    return _Resolved(_from_hub(name, allow_pickle=allow_pickle), None)


def _check_root(folder: Path) -> Path:
    """Refuse folders (and files inside them, via symlinks) outside the allowed roots."""
    real = folder.resolve()
    roots = allowed_roots()
    if not roots:
        return real

    def inside(path: Path) -> bool:
        return any(path.is_relative_to(root) for root in roots)

    if not inside(real) or not all(inside(f.resolve()) for f in real.rglob("*")):
        raise SecurityError(
            f"the model folder {folder} is outside the allowed model folders "
            f"({os.pathsep.join(map(str, roots))}; server setting ROLLOUT_ALLOWED_MODEL_ROOTS)"
        )
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


def _check_folder(folder: Path, *, allow_pickle: bool, trust_remote_code: bool) -> dict[str, Any]:
    """Read config.json and apply the weight-format and remote-code rules; return the config dict."""
    config_file = folder / "config.json"
    if not config_file.is_file():
        raise ModelLoadError(f"{folder} is not a transformers model folder (no config.json)")
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


def _custom_code_reason(folder: Path, config: dict[str, Any]) -> str | None:
    with _TRANSFORMERS_LOCK:
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


# ----------------------------------------------------------------------------------------------
# Loading


def _device(device: str | torch.device | None) -> torch.device:
    if device is None:
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        target = torch.device(device)
    except (RuntimeError, TypeError) as err:
        raise ModelLoadError(f"unknown device {device!r}") from err
    if target.type == "cuda" and not torch.cuda.is_available():
        raise ModelLoadError("device 'cuda' was asked for but no GPU is available; use device='cpu'")
    return target


def infer_task(config: Any, folder: Path, architecture: str | None = None) -> str:
    """The task from the architecture name (default: the config's first), the family, sentence-transformers files."""
    spec = families.spec_for(config)
    archs = list(getattr(config, "architectures", None) or [])
    arch = architecture if architecture is not None else (archs[0] if archs else "")
    if spec.modality == "image":
        return "image-classification" if "ForImageClassification" in arch else "image-backbone"
    if getattr(config, "is_encoder_decoder", False) or "ForConditionalGeneration" in arch:
        return "seq2seq"
    if "ForSequenceClassification" in arch:
        return "text-classification"
    if "ForCausalLM" in arch or "LMHeadModel" in arch or spec.causal:
        return "causal-lm"
    if (folder / "modules.json").is_file() or (folder / "sentence_bert_config.json").is_file():
        return "sentence-encoder"
    return "text-encoder"


def _model_class(task: str, config: Any, folder: Path) -> Any:
    """The class named in config.architectures when it fits the task, else the Auto class for the task."""
    import transformers

    for arch in getattr(config, "architectures", None) or []:
        cls = getattr(transformers, arch, None)
        if (isinstance(cls, type) and issubclass(cls, transformers.PreTrainedModel)
                and infer_task(config, folder, arch) == task):
            return cls
    return getattr(transformers, _AUTO_CLASS[task])


def _load(
    folder: Path, config_dict: dict[str, Any], device: torch.device, task: str | None,
    allow_pickle: bool, trust_remote_code: bool,
) -> ModelHandle:
    import transformers

    try:
        config = transformers.AutoConfig.from_pretrained(str(folder), trust_remote_code=trust_remote_code)
    except _BROKEN_FILES as err:
        raise ModelLoadError(f"could not read the model config in {folder}: {err}") from err
    spec = families.check_supported(config)
    inferred = infer_task(config, folder)
    task = task or inferred
    if families.TASK_MODALITY[task] != spec.modality:
        raise ModelLoadError(f"task {task!r} does not fit a {spec.modality} model ({config.model_type})")
    cls = _model_class(task, config, folder)
    try:
        size.declared_params(cls, config)
        model, info = cls.from_pretrained(
            str(folder),
            attn_implementation="eager",
            use_safetensors=None if allow_pickle else True,
            trust_remote_code=trust_remote_code,
            dtype=torch.float32,
            output_loading_info=True,
        )
    except _BROKEN_FILES as err:
        raise ModelLoadError(f"could not load the model in {folder} as {task}: {type(err).__name__}: "
                             f"{str(err)[:300]}") from err
    size.check_weights_match(info, model, folder)
    model.eval().to(device)
    processor = _processor(folder, spec.modality, trust_remote_code)
    num_layers, num_heads = families.layer_and_head_counts(config)
    labels = None
    if task == "image-classification" or task == "text-classification":
        id2label = getattr(model.config, "id2label", None) or {}
        labels = [str(id2label.get(i, id2label.get(str(i), f"LABEL_{i}"))) for i in range(model.config.num_labels)]
    return ModelHandle(
        name=str(folder), source=str(folder), family=config.model_type, task=task, modality=spec.modality,
        model=model, processor=processor, labels=labels, device=device, num_layers=num_layers, num_heads=num_heads,
    )


def _processor(folder: Path, modality: str, trust_remote_code: bool) -> Any:
    import transformers

    try:
        if modality == "image":
            return transformers.AutoImageProcessor.from_pretrained(
                str(folder), backend="pil", trust_remote_code=trust_remote_code
            )
        return transformers.AutoTokenizer.from_pretrained(str(folder), trust_remote_code=trust_remote_code)
    except _BROKEN_FILES as err:
        what = "image processor (preprocessor_config.json)" if modality == "image" else "tokenizer"
        raise ModelLoadError(f"could not load the {what} in {folder}: {err}") from err

