"""A checked model folder -> a `ModelHandle`: the config, the task, the model class, the weights, the processor.

Attention is always eager (SDPA and flash attention return no attention weights); the parameter count the
config declares is checked before any allocation and the loaded weights against the config (`size`).
"""
from __future__ import annotations

import pickle
import threading
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

import torch

from huggingface_hub.errors import StrictDataclassFieldValidationError
from safetensors import SafetensorError

from rollout_core.errors import ModelLoadError
from rollout_core.models import families, size
from rollout_core.models.handle import ModelHandle

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

TRANSFORMERS_LOCK = threading.RLock()
"""Serialises the code that first touches transformers' lazily imported modules (configs, model classes):
two threads doing it at once race inside transformers ("cannot import name 'CONFIG_MAPPING'"). Cache hits
do not take it; loads of different models run one after the other."""


def device_for(device: str | torch.device | None) -> torch.device:
    """The torch device asked for (None: the GPU when there is one); `ModelLoadError` when unusable."""
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


@contextmanager
def _no_weight_loading_bar() -> Iterator[None]:
    """transformers' "Loading weights" progress bar silenced while this library loads a model: it would land on the
    stderr of the CLI and of the dashboard's server at every load. Other bars (downloads) are left alone, and the
    previous hook is restored. Loads run under TRANSFORMERS_LOCK, so the global hook is not raced by our own loads."""
    from transformers.utils import logging as hf_logging

    def hook(factory: Any, args: tuple, kwargs: dict) -> Any:
        if kwargs.get("desc") == "Loading weights":
            return hf_logging.EmptyTqdm(*args, **kwargs)
        return previous(factory, args, kwargs) if previous is not None else factory(*args, **kwargs)

    previous = hf_logging.set_tqdm_hook(hook)
    try:
        yield
    finally:
        hf_logging.set_tqdm_hook(previous)


def load_folder(
    folder: Path, config_dict: dict[str, Any], device: torch.device, task: str | None,
    allow_pickle: bool, trust_remote_code: bool,
) -> ModelHandle:
    """Build the model in `folder` (already checked by `folders.check_folder`) on `device`."""
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
        size.declared_params(cls, config, folder)
        with _no_weight_loading_bar():
            model, info = cls.from_pretrained(
                str(folder),
                attn_implementation="eager",
                use_safetensors=None if allow_pickle else True,
                trust_remote_code=trust_remote_code,
                dtype=torch.float32,
                output_loading_info=True,
                ignore_mismatched_sizes=True,  # refused below by size.check_weights_match, naming the weight
            )
    except pickle.UnpicklingError as err:
        raise ModelLoadError(f"could not read the pickle weights in {folder}: torch's safe loader (weights_only) "
                             f"refused them, so nothing in them ran; the file is broken or holds more than tensors "
                             f"({_unpickling_reason(err)}). Use a safetensors copy") from err
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


def _unpickling_reason(err: pickle.UnpicklingError) -> str:
    """The informative line of torch's long weights_only message ("Trying to load unsupported GLOBAL posix.system
    ...", "Unsupported operand 110"), without its advice to load with weights_only=False."""
    boilerplate = ("Weights only load failed", "Please file an issue", "Check the documentation")
    lines = [line.strip().removeprefix("WeightsUnpickler error:").strip() for line in str(err).splitlines()]
    found = [line for line in lines if line and not line.startswith(boilerplate)]
    return (found[0] if found else type(err).__name__)[:200]


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
