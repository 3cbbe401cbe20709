"""`explain_text`, `explain_texts`, `explain_image`: one input (or a batch) -> `Explanation`.

The pipeline is the same for every family: prepare inputs -> one forward pass with attentions
(`capture.run`, or the streaming path of `lowmem` when the attentions would not fit the memory budget)
-> the chosen method's matrix through the maths package -> the explained row(s) -> an `Explanation`
with every position kept (special positions flagged). The explained row is the pooling of the
model's head (`families.head_pooling`): [CLS] for classifiers, the mean of the real tokens for
sentence encoders, the predicted position for causal language models.

The steps live in rollout_core.pipeline (heads, batch, seq2seq, assemble); this module is the public
API and the checks of its arguments.
"""
from __future__ import annotations

import inspect
import os
from dataclasses import dataclass
from typing import Any, Iterator, Sequence, Union

import numpy as np
import torch

from rollout_core import methods
from rollout_core.calibration import calibrated_head, config_temperature
from rollout_core.errors import InputError, RolloutError
from rollout_core.explanation import Explanation
from rollout_core.inputs.text import EncodedText, encode_texts, model_max_length, normalise_text, pad_batch
from rollout_core.inputs.text import pad_token_id
from rollout_core.models import families
from rollout_core.models.handle import ModelHandle
from rollout_core.models.loading import load_model
from rollout_core.models.registry import DEFAULTS
from rollout_core.options import CAPTURES, HEAD_FUSIONS, Options
from rollout_core.pipeline import to_device
from rollout_core.pipeline.assemble import image_explanation, processed_image, text_explanation
from rollout_core.pipeline.batch import BatchResult, explain_batch
from rollout_core.pipeline.heads import ZERO_SHOT_TEMPERATURE, Head, image_head, text_head
from rollout_core.pipeline.seq2seq import decoder_to_source, explain_seq2seq

__all__ = ["METHODS", "ZERO_SHOT_TEMPERATURE", "decoder_to_source", "explain_image", "explain_text", "explain_texts",
           "processed_image", "text_batches"]

METHODS = methods.names()
TEXT_BATCH_SIZE = 16

ModelArg = Union[str, "os.PathLike[str]", ModelHandle, None]
"""A registry name, local folder or hub id (loaded through the cache), or a loaded handle."""


# ----------------------------------------------------------------------------------------------
# Public API


def explain_text(
    model: ModelArg,
    text: str,
    *,
    method: str | None = None,
    target: str | int | None = None,
    head_fusion: str = "mean",
    residual_weight: float = 1.0,
    discard_ratio: float = 0.0,
    start_layer: int = 0,
    end_layer: int | None = None,
    keep_heads: bool = False,
    labels: Sequence[str] | None = None,
    max_length: int | None = None,
    capture: str = "auto",
    full_matrix: bool = False,
) -> Explanation:
    """Explain one text. `model`: registry name, folder, hub id or a handle (None: default-text).
    `method` None: the model's measured default (`models.measured.default_method`; rollout without one), named in
    `settings["method_default"]`.

    `target`: the class label or index (classifiers, zero-shot labels; default: predicted), or the
    position whose next-token prediction is explained (causal LMs; default: the last real token), or the
    decoder position (encoder-decoders; default: the last one). `labels`: zero-shot candidate labels
    for sentence encoders. `full_matrix`: also compute flow's whole n x n matrix (n² max flows).
    """
    return explain_texts(
        model, [text], method=method, target=target, head_fusion=head_fusion, residual_weight=residual_weight,
        discard_ratio=discard_ratio, start_layer=start_layer, end_layer=end_layer, keep_heads=keep_heads,
        labels=labels, max_length=max_length, capture=capture, full_matrix=full_matrix,
    )[0]


def explain_texts(
    model: ModelArg,
    texts: Sequence[str],
    *,
    method: str | None = None,
    target: str | int | Sequence[str | int | None] | None = None,
    head_fusion: str = "mean",
    residual_weight: float = 1.0,
    discard_ratio: float = 0.0,
    start_layer: int = 0,
    end_layer: int | None = None,
    keep_heads: bool = False,
    labels: Sequence[str] | None = None,
    max_length: int | None = None,
    capture: str = "auto",
    batch_size: int = TEXT_BATCH_SIZE,
    full_matrix: bool = False,
) -> list[Explanation]:
    """Explain several texts, batched with padding; each result equals `explain_text` on that text.

    `target` is one target for all texts or a list with one per text.
    """
    job = _text_job(model, texts, method=method, target=target, head_fusion=head_fusion,
                    residual_weight=residual_weight, discard_ratio=discard_ratio, start_layer=start_layer,
                    end_layer=end_layer, keep_heads=keep_heads, labels=labels, max_length=max_length,
                    capture=capture, full_matrix=full_matrix)
    if job.handle.task == "seq2seq":
        return _noted([explain_seq2seq(job.handle, e, job.opts, t, job.limit)
                       for e, t in zip(job.encoded, job.targets)], job.note)
    out = [text_explanation(job.handle, enc, result, b, job.opts, job.limit, job.labels)
           for chunk, result in _batches(job, batch_size) for b, enc in enumerate(chunk)]
    return _noted(out, job.note)


def text_batches(model: ModelArg, texts: Sequence[str], *, method: str,
                 batch_size: int = TEXT_BATCH_SIZE) -> Iterator[tuple[list[EncodedText], BatchResult]]:
    """The batches `explain_texts` computes (default options), without building Explanations: each batch's
    encoded texts and its `BatchResult`, sample b of which `explain_texts` turns into its Explanation. For
    callers that need a few fields of many rows (the corpus engine); not for encoder-decoder models."""
    job = _text_job(model, texts, method=method)
    if job.handle.task == "seq2seq":
        raise InputError("text_batches does not cover encoder-decoder models; use explain_texts")
    return _batches(job, batch_size)


@dataclass(frozen=True)
class _TextJob:
    """What explaining a list of texts runs with, checked and prepared once."""

    handle: ModelHandle
    opts: Options
    head: Head
    limit: int
    labels: Sequence[str] | None
    encoded: list[EncodedText]
    targets: list[Any]
    note: str | None  # why this method, when the caller named none


def _text_job(
    model: ModelArg, texts: Sequence[str], *, method: str | None, target: Any = None, head_fusion: str = "mean",
    residual_weight: float = 1.0, discard_ratio: float = 0.0, start_layer: int = 0, end_layer: int | None = None,
    keep_heads: bool = False, labels: Sequence[str] | None = None, max_length: int | None = None,
    capture: str = "auto", full_matrix: bool = False,
) -> _TextJob:
    """Check the arguments of `explain_texts`; encode the texts; choose the head and the options."""
    handle = _handle(model, "text")
    if isinstance(texts, str) or not isinstance(texts, Sequence) or not texts:
        raise InputError("texts must be a non-empty list of strings")
    targets = _per_item_targets(target, len(texts))
    zero_shot = labels is not None
    method, note = _default_method(handle, method, capture, zero_shot)
    opts = _options(handle, method, head_fusion, residual_weight, discard_ratio, start_layer, end_layer,
                    keep_heads, capture, full_matrix, zero_shot)
    head = text_head(handle, labels)
    if labels is None and handle.task == "text-classification" and handle.labels and (
            getattr(handle.config, "problem_type", None) != "multi_label_classification"):
        head = calibrated_head(head, config_temperature(handle.config), handle.labels)
    limit = model_max_length(handle.processor, handle.config, families.spec_for(handle.config).position_offset,
                             max_length)
    encoded = encode_texts(handle.processor, [normalise_text(t) for t in texts], limit)
    return _TextJob(handle, opts, head, limit, labels, encoded, targets, note)


def _batches(job: _TextJob, batch_size: int) -> Iterator[tuple[list[EncodedText], BatchResult]]:
    """The job's texts in padded batches of `batch_size` through `explain_batch`."""
    size = max(1, int(batch_size))
    for start in range(0, len(job.encoded), size):
        chunk = job.encoded[start : start + size]
        inputs = to_device(pad_batch(chunk, pad_token_id(job.handle.processor)), job.handle.device)
        real = inputs["attention_mask"].bool()
        yield chunk, explain_batch(job.handle, inputs, real, None, job.head, job.targets[start : start + size],
                                   job.opts)


def explain_image(
    model: ModelArg,
    image: Any,
    *,
    method: str | None = None,
    target: str | int | None = None,
    head_fusion: str = "mean",
    residual_weight: float = 1.0,
    discard_ratio: float = 0.0,
    start_layer: int = 0,
    end_layer: int | None = None,
    keep_heads: bool = False,
    capture: str = "auto",
    full_matrix: bool = False,
) -> Explanation:
    """Explain one image (path, bytes, file object, PIL image or array). `model` None: default-image; `method`
    None: the model's measured default, as in `explain_text`.
    `full_matrix`: also compute flow's whole n x n matrix (n² max flows; slow on images)."""
    from rollout_core.inputs.images import load_image, model_pixels

    handle = _handle(model, "image")
    method, note = _default_method(handle, method, capture)
    opts = _options(handle, method, head_fusion, residual_weight, discard_ratio, start_layer, end_layer,
                    keep_heads, capture, full_matrix)
    picture = load_image(image)
    pixels = model_pixels(handle.processor, picture)
    height, width = int(pixels.shape[-2]), int(pixels.shape[-1])
    layout = families.image_layout(handle.config, height, width)
    inputs: dict[str, Any] = {"pixel_values": pixels.to(handle.device)}
    if _accepts(handle.model, "interpolate_pos_encoding") and (height, width) != _config_size(handle.config):
        inputs["interpolate_pos_encoding"] = True
    real = torch.ones(1, layout.num_tokens, dtype=torch.bool, device=handle.device)
    head = image_head(handle)
    result = explain_batch(handle, inputs, real, layout, head, [target], opts)
    if result.n != layout.num_tokens:
        raise RolloutError(
            f"the model saw {result.n} tokens, but its family layout predicts {layout.num_tokens} "
            f"({len(layout.prefix_names)} special + {layout.grid[0]}x{layout.grid[1]} patches)"
        )
    return _noted([image_explanation(handle, layout, pixels[0], (picture.height, picture.width), result, opts)],
                  note)[0]


# ----------------------------------------------------------------------------------------------
# Validation


def _handle(model: ModelArg, modality: str) -> ModelHandle:
    if isinstance(model, ModelHandle):
        handle = model
    elif model is None:
        handle = load_model(DEFAULTS[modality])
    elif isinstance(model, (str, os.PathLike)):
        handle = load_model(model)
    else:
        raise InputError(f"model must be a name, a folder or a ModelHandle, not {type(model).__name__}")
    if handle.modality != modality:
        raise InputError(
            f"{handle.name} is a{'n' if handle.modality == 'image' else ''} {handle.modality} model; "
            f"use explain_{handle.modality} (or choose a {modality} model)"
        )
    return handle


def _default_method(handle: ModelHandle, method: str | None, capture_mode: str,
                    zero_shot: bool = False) -> tuple[str, str | None]:
    """The method to run and, when the caller named none, a note saying why it is that one: the measured best
    of this registry model (models/measured/<name>.json), else rollout."""
    from rollout_core.models import measured

    if method is not None:
        return method, None
    if measured.figures(handle.name) is None:
        return measured.FALLBACK, f"the default: {handle.name} has no measured figures"
    chosen = measured.default_method(handle.name, methods.names())
    if methods.get(chosen).refusal(handle, capture=capture_mode, zero_shot=zero_shot) is not None:
        return measured.FALLBACK, (f"the default: the measured default {chosen} cannot run with this capture "
                                   "or model")
    return chosen, f"the measured default of {handle.name}: best pointing game, then deletion AUC"


def _noted(explanations: list[Explanation], note: str | None) -> list[Explanation]:
    """Name the default method in each explanation's settings when the caller named none."""
    if note is not None:
        for e in explanations:
            e.settings["method_default"] = note
    return explanations


def _options(
    handle: ModelHandle, method: str, head_fusion: str, residual_weight: float, discard_ratio: float,
    start_layer: int, end_layer: int | None, keep_heads: bool, capture_mode: str, full_matrix: bool = False,
    zero_shot: bool = False,
) -> Options:
    spec = methods.get(method)
    if head_fusion not in HEAD_FUSIONS:
        raise InputError(f"unknown head fusion {head_fusion!r}; choose one of: {', '.join(HEAD_FUSIONS)}")
    if capture_mode not in CAPTURES:
        raise InputError(f"unknown capture {capture_mode!r}; choose one of: {', '.join(CAPTURES)}")
    residual = _number("residual_weight", residual_weight)
    if residual < 0:
        raise InputError(f"residual_weight must be 0 or more, not {residual_weight}")
    discard = _number("discard_ratio", discard_ratio)
    if not 0.0 <= discard < 1.0:
        raise InputError(f"discard_ratio must be in [0, 1), not {discard_ratio}")
    layers = handle.num_layers
    start = _layer("start_layer", start_layer, layers)
    if spec.first_layer is not None:
        start = max(start, spec.first_layer(handle))
    end = layers if end_layer is None else _layer("end_layer", end_layer, layers + 1)
    if end <= start:
        raise InputError(f"end_layer ({end}) must be greater than start_layer ({start}); the model has {layers} layers")
    methods.check(method, handle, capture=capture_mode, zero_shot=zero_shot)
    return Options(method, head_fusion, residual, discard, start, end, bool(keep_heads), capture_mode,
                   bool(full_matrix))


def _number(name: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not np.isfinite(value):
        raise InputError(f"{name} must be a finite number, not {value!r}")
    return float(value)


def _layer(name: str, value: Any, bound: int) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise InputError(f"{name} must be an integer, not {value!r}")
    value = int(value) + (bound if value < 0 else 0)
    if not 0 <= value < bound:
        layers = bound if name == "start_layer" else bound - 1
        raise InputError(f"{name} {value} is out of range: the model has {layers} layers")
    return value


def _per_item_targets(target: Any, count: int) -> list[Any]:
    if isinstance(target, (list, tuple)):
        if len(target) != count:
            raise InputError(f"{len(target)} targets were given for {count} texts")
        return list(target)
    return [target] * count


def _accepts(model: torch.nn.Module, name: str) -> bool:
    return name in inspect.signature(model.forward).parameters


def _config_size(config: Any) -> tuple[int, int]:
    size = getattr(config, "image_size", None)
    return (size, size) if isinstance(size, int) else tuple(size or (0, 0))
