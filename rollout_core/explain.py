"""`explain(model, input, options)`: one input (or a batch of texts) -> `Explanation`; `prepare` + `Prepared.run`
the same in two steps (encode once, check the cost, then run); `explain_text`, `explain_texts`, `explain_image`
its wrappers with the options as keywords.

The pipeline is the same for every family: prepare inputs -> one forward pass with attentions
(`capture.run`, or the streaming path of `lowmem` when the attentions would not fit the memory budget)
-> the chosen method's matrix through the maths package -> the explained row(s) -> an `Explanation`
with every position kept (special positions flagged). The explained row is the pooling of the
model's head (`families.head_pooling`): [CLS] for classifiers, the mean of the real tokens for
sentence encoders, the predicted position for causal language models.

The steps live in rollout_core.pipeline (heads, batch, seq2seq, assemble); this module is the public
API and the checks of its arguments (the options' own checks are `options.validate`'s, from `options.OPTIONS`).
"""
from __future__ import annotations

import dataclasses
import inspect
import os
import sys
import types
from dataclasses import dataclass, field
from typing import Any, Iterator, Sequence, Union

import torch

from rollout_core import methods
from rollout_core.errors import InputError, RolloutError
from rollout_core.explanation import Explanation
from rollout_core.inputs.text import EncodedText, encode_texts, lowered, normalise_text, pad_batch
from rollout_core.models import families
from rollout_core.models.handle import ModelHandle
from rollout_core.models.loading import load_model
from rollout_core.models.registry import DEFAULTS
from rollout_core.options import SPECS, Options, validate, with_overrides
from rollout_core.pipeline import to_device
from rollout_core.pipeline.assemble import image_explanation, processed_image, text_explanation
from rollout_core.pipeline.batch import BatchResult, explain_batch, explain_batch_methods, without_autograd
from rollout_core.pipeline.facts import handle_facts
from rollout_core.pipeline.heads import ZERO_SHOT_TEMPERATURE, Head, image_head, text_head
from rollout_core.pipeline.seq2seq import decoder_to_source, explain_seq2seq

__all__ = ["METHODS", "ZERO_SHOT_TEMPERATURE", "Prepared", "decoder_to_source", "explain", "explain_image",
           "explain_methods", "explain_text", "explain_texts", "prepare", "processed_image", "text_batches"]

METHODS = methods.names()
TEXT_BATCH_SIZE = 16

ModelArg = Union[str, "os.PathLike[str]", ModelHandle, None]
"""A registry name, local folder or hub id (loaded through the cache), or a loaded handle."""


# ----------------------------------------------------------------------------------------------
# Public API


def explain(
    model: ModelArg,
    input: Any,
    options: Options | None = None,
    *,
    modality: str | None = None,
    target: Any = None,
    labels: Sequence[str] | None = None,
    max_length: int | None = None,
    batch_size: int = TEXT_BATCH_SIZE,
    **overrides: Any,
) -> Explanation | list[Explanation]:
    """Explain `input` with `model`: the one entry point. A text gives an `Explanation`, a list of texts a list of
    them (batched; each equals the text's own), an image (path, bytes, file object, PIL image or array) an
    `Explanation`. The model's modality decides how `input` is read; with `model` None (the default text or image
    model) a string or list of strings is text and anything else an image, unless `modality` says otherwise.

    `options`: the method options (`Options()`: the model's measured default method); `**overrides` replace
    fields of it (`explain(m, x, method="flow", start_layer=2)`). `target`, `labels`, `max_length`: as in
    `explain_text` (`options.OPTIONS` has every option's range and help). `prepare` then `Prepared.run` is the same
    in two steps, for a caller that checks the cost first."""
    return prepare(model, input, options, modality=modality, target=target, labels=labels, max_length=max_length,
                   batch_size=batch_size, **overrides).run()


def prepare(
    model: ModelArg,
    input: Any,
    options: Options | None = None,
    *,
    modality: str | None = None,
    target: Any = None,
    labels: Sequence[str] | None = None,
    max_length: int | None = None,
    batch_size: int = TEXT_BATCH_SIZE,
    **overrides: Any,
) -> "Prepared":
    """What `explain` runs, checked and encoded once, before any forward pass: the options validated against the
    model, the text tokenised or the image processed. Its `tokens` and `outputs` are what a cost estimate reads
    (`serving.budget.check_prepared`); `run()` then explains without encoding again."""
    opts = with_overrides(options, overrides)
    handle = _handle(model, _modality(model, input, modality))
    if handle.modality == "text":
        batched = isinstance(input, (list, tuple))
        return _prepare_texts(handle, list(input) if batched else [input], opts, target=target, labels=labels,
                              max_length=max_length, batch_size=batch_size, batched=batched)
    if labels is not None or max_length is not None:
        raise InputError("labels and max_length are options of text models; this is an image model")
    return _prepare_image(handle, input, opts, target)


def explain_methods(
    model: ModelArg,
    input: Any,
    method_names: Sequence[str],
    options: Options | None = None,
    *,
    modality: str | None = None,
    target: Any = None,
    labels: Sequence[str] | None = None,
    max_length: int | None = None,
    **overrides: Any,
) -> dict[str, Explanation]:
    """One text or image explained by each of `method_names` with the same options: {method: Explanation}, each equal to
    `explain(model, input, options, method=m, ...)`. The input is encoded once, and methods whose forward pass is
    the same (no gradients, no recording hooks, the same head fusion: raw attention, rollout, flow) share one pass:
    a comparison of methods or an evaluation pays one forward for them."""
    if isinstance(method_names, str) or not method_names or not all(isinstance(m, str) for m in method_names):
        raise InputError("methods must be a non-empty list of method names")
    if isinstance(input, (list, tuple)) and all(isinstance(t, str) for t in input):
        raise InputError("explain_methods explains one text or image; explain a list of texts with explain_texts")
    opts = with_overrides(options, overrides)
    names = list(dict.fromkeys(method_names))
    first = prepare(model, input, opts, modality=modality, target=target, labels=labels, max_length=max_length,
                    method=names[0])
    runs = [first]
    for name in names[1:]:
        resolved, note = _options(first.handle, dataclasses.replace(opts, method=name), labels is not None)
        runs.append(dataclasses.replace(first, options=resolved, note=note))
    return dict(zip(names, _run_together(runs)))


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
    The same as `explain(model, [text], ...)[0]`.
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

    `target` is one target for all texts or a list with one per text. The same as `explain(model, texts, ...)`.
    """
    opts = Options(method, head_fusion, residual_weight, discard_ratio, start_layer, end_layer, keep_heads, capture,
                   full_matrix)
    return _prepare_texts(_handle(model, "text"), texts, opts, target=target, labels=labels, max_length=max_length,
                          batch_size=batch_size, batched=True).run()


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
    `full_matrix`: also compute flow's whole n x n matrix (n² max flows; slow on images).
    The same as `explain(model, image, ...)` with an image model."""
    opts = Options(method, head_fusion, residual_weight, discard_ratio, start_layer, end_layer, keep_heads, capture,
                   full_matrix)
    return _prepare_image(_handle(model, "image"), image, opts, target).run()


def text_batches(model: ModelArg, texts: Sequence[str], *, method: str,
                 batch_size: int = TEXT_BATCH_SIZE) -> Iterator[tuple[list[EncodedText], BatchResult]]:
    """The batches `explain_texts` computes (default options), without building Explanations: each batch's
    encoded texts and its `BatchResult`, sample b of which `explain_texts` turns into its Explanation. For
    callers that need a few fields of many rows (the corpus engine); not for encoder-decoder models."""
    prepared = _prepare_texts(_handle(model, "text"), texts, Options(method=method), batch_size=batch_size,
                              batched=True)
    if prepared.handle.task == "seq2seq":
        raise InputError("text_batches does not cover encoder-decoder models; use explain_texts")
    return prepared.batches()


@dataclass(frozen=True)
class _Image:
    """A processed image: the model's inputs and what the explanation needs of the source."""

    source_size: tuple[int, int]  # (height, width) of the given image
    pixels: torch.Tensor  # (1, 3, H, W) as the model sees it
    layout: families.ImageLayout
    inputs: dict[str, Any]


@dataclass(frozen=True)
class Prepared:
    """An explain request checked and encoded for its model (`prepare`): the resolved options, the head, the
    encoded texts or the processed image. `run()` computes the explanation(s) from it."""

    handle: ModelHandle
    options: Options  # validated against the model: method and layer range resolved
    head: Head
    targets: list[Any]
    note: str | None  # why this method, when the caller named none
    encoded: list[EncodedText] = field(default_factory=list)  # texts
    limit: int = 0  # texts: the most tokens a text keeps
    labels: Sequence[str] | None = None  # zero-shot labels
    batched: bool = False  # a list of texts was given: run() returns a list
    batch_size: int = TEXT_BATCH_SIZE
    image: _Image | None = None

    @property
    def tokens(self) -> int:
        """The positions the model sees (the longest text's tokens, or the image's patches and special tokens)."""
        if self.image is not None:
            return self.image.layout.num_tokens
        return max(len(e.input_ids) for e in self.encoded)

    @property
    def outputs(self) -> int:
        """The positions the model's readout pools at `tokens` positions (1 for a [CLS] head)."""
        patches = None if self.image is None else self.image.layout.patch_positions
        return families.pooled_positions(self.handle, self.tokens, patches)

    def run(self) -> Explanation | list[Explanation]:
        """The explanation (a list of them for a list of texts), computed from the encoded input (batched, then
        assembled, without autograd where the method needs none: `without_autograd`)."""
        if self.image is not None:
            return _run_together([self])[0]
        if self.handle.task == "seq2seq":
            out = [explain_seq2seq(self.handle, e, self.options, t, self.limit)
                   for e, t in zip(self.encoded, self.targets)]
        else:
            with without_autograd([self.options]):
                out = [text_explanation(self.handle, enc, result, b, self.options, self.limit, self.labels)
                       for chunk, result in self.batches() for b, enc in enumerate(chunk)]
        out = _noted(out, self.note)
        return out if self.batched else out[0]

    def batches(self) -> Iterator[tuple[list[EncodedText], BatchResult]]:
        """The texts in padded batches of `batch_size` through `explain_batch`."""
        size = max(1, int(self.batch_size))
        for start in range(0, len(self.encoded), size):
            chunk = self.encoded[start : start + size]
            inputs = to_device(pad_batch(chunk, handle_facts(self.handle).pad_id), self.handle.device)
            real = inputs["attention_mask"].bool()
            yield chunk, explain_batch(self.handle, inputs, real, None, self.head, self.targets[start : start + size],
                                       self.options)

    def _image_result(self, result: BatchResult) -> Explanation:
        """The image's Explanation from its batch result."""
        image, handle = self.image, self.handle
        assert image is not None
        layout = image.layout
        if result.n != layout.num_tokens:
            raise RolloutError(
                f"the model saw {result.n} tokens, but its family layout predicts {layout.num_tokens} "
                f"({len(layout.prefix_names)} special + {layout.grid[0]}x{layout.grid[1]} patches)"
            )
        return image_explanation(handle, layout, image.pixels[0], image.source_size, result, self.options)


def _run_together(runs: list[Prepared]) -> list[Explanation]:
    """Each of `runs` (one text or image encoded once, one method each) explained, the batch computed once for all
    (`explain_batch_methods`: methods with the same forward pass share it) and each assembled without autograd where
    its method needs none; each equals its own `run()`."""
    first = runs[0]
    if first.handle.task == "seq2seq":
        return [run.run() for run in runs]
    handle, layout = first.handle, None if first.image is None else first.image.layout
    if first.image is not None:
        inputs = first.image.inputs
        real = torch.ones(1, first.image.layout.num_tokens, dtype=torch.bool, device=handle.device)
    else:
        inputs = to_device(pad_batch(first.encoded, handle_facts(handle).pad_id), handle.device)
        real = inputs["attention_mask"].bool()
    results = explain_batch_methods(handle, inputs, real, layout, first.head, first.targets,
                                    [run.options for run in runs])
    out = []
    for run, result in zip(runs, results):
        with without_autograd([run.options]):
            out += _noted([run._image_result(result) if run.image is not None else text_explanation(
                handle, run.encoded[0], result, 0, run.options, run.limit, run.labels)], run.note)
    return out


def _prepare_texts(
    handle: ModelHandle, texts: Sequence[str], opts: Options, *, target: Any = None,
    labels: Sequence[str] | None = None, max_length: int | None = None, batch_size: int = TEXT_BATCH_SIZE,
    batched: bool,
) -> Prepared:
    """Check a text request; encode the texts; choose the head and the options."""
    if isinstance(texts, str) or not isinstance(texts, Sequence) or not texts:
        raise InputError("texts must be a non-empty list of strings")
    targets = _per_item_targets(target, len(texts))
    zero_shot = labels is not None
    opts, note = _options(handle, opts, zero_shot)
    facts = handle_facts(handle)
    head = text_head(handle, labels, None if zero_shot or not handle.labels else facts.temperature)
    assert facts.max_length is not None  # a text model's
    limit = lowered(facts.max_length, SPECS["max_length"].check(max_length))
    encoded = encode_texts(handle.processor, [normalise_text(t) for t in texts], limit)
    return Prepared(handle, opts, head, targets, note, encoded=encoded, limit=limit, labels=labels, batched=batched,
                    batch_size=batch_size)


def _prepare_image(handle: ModelHandle, source: Any, opts: Options, target: Any) -> Prepared:
    """Check an image request; decode and process the image as the model expects it."""
    from rollout_core.inputs.images import load_image, model_pixels

    opts, note = _options(handle, opts)
    picture = load_image(source)
    pixels = model_pixels(handle.processor, picture)
    height, width = int(pixels.shape[-2]), int(pixels.shape[-1])
    inputs: dict[str, Any] = {"pixel_values": pixels.to(handle.device)}
    if _accepts(handle.model, "interpolate_pos_encoding") and (height, width) != _config_size(handle.config):
        inputs["interpolate_pos_encoding"] = True
    image = _Image((picture.height, picture.width), pixels, families.image_layout(handle.config, height, width),
                   inputs)
    return Prepared(handle, opts, image_head(handle), [target], note, image=image)


# ----------------------------------------------------------------------------------------------
# Validation


def _modality(model: ModelArg, input: Any, modality: str | None) -> str:
    """The modality asked for: `modality`, else the model's, else (default model) text for strings."""
    if modality is not None:
        if modality not in ("text", "image"):
            raise InputError(f"modality must be 'text' or 'image', not {modality!r}")
        return modality
    if isinstance(model, ModelHandle):
        return model.modality
    if isinstance(model, (str, os.PathLike)):
        return load_model(model).modality
    texts = isinstance(input, str) or (isinstance(input, (list, tuple)) and all(isinstance(t, str) for t in input))
    return "text" if texts else "image"


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
    if method is not None:
        return method, None
    from rollout_core.models import measured

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


def _options(handle: ModelHandle, opts: Options, zero_shot: bool = False) -> tuple[Options, str | None]:
    """`opts` validated against the model (`options.validate`) and the method's needs (`methods.check`), with the
    measured default method when none is named, and the note saying why it is that one."""
    method, note = _default_method(handle, opts.method, opts.capture, zero_shot)
    spec = methods.get(method)
    first = spec.first_layer(handle) if spec.first_layer is not None else 0
    resolved = validate(opts if opts.method == method else dataclasses.replace(opts, method=method),
                        handle.num_layers, first)
    methods.check(method, handle, capture=resolved.capture, zero_shot=zero_shot)
    return resolved, note


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


class _CallableModule(types.ModuleType):
    """`rollout_core.explain` names this module (the package attribute of an imported submodule) and the one entry
    point: calling the module is calling `explain`, so `rollout_core.explain(model, x)` and
    `from rollout_core import explain; explain.prepare(...)` both work."""

    def __call__(self, *args: Any, **kwargs: Any) -> Explanation | list[Explanation]:
        return explain(*args, **kwargs)


sys.modules[__name__].__class__ = _CallableModule
__signature__ = inspect.signature(explain)  # what `help` / `inspect.signature(rollout_core.explain)` show
