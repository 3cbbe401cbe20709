"""`explain_text`, `explain_texts`, `explain_image`: one input (or a batch) -> `Explanation`.

The pipeline is the same for every family: prepare inputs -> one forward pass with attentions
(`capture.run`, or the streaming path of `lowmem` when the attentions would not fit the memory budget)
-> the chosen method's matrix through the maths package -> the explained row(s) -> an `Explanation`
with every position kept (special positions flagged). The explained row is the pooling of the
model's head (`families.head_pooling`): [CLS] for classifiers, the mean of the real tokens for
sentence encoders, the predicted position for causal language models.

Zero-shot labels (sentence encoders): prediction = softmax(cos(text, label) / ZERO_SHOT_TEMPERATURE)
over the labels, with mean-pooled, L2-normalised embeddings of the text and of each label.
"""
from __future__ import annotations

import contextlib

import inspect
import os
from dataclasses import dataclass
from typing import Any, Callable, Sequence, Union

import numpy as np
import torch

from rollout_core import capture, methods
from rollout_core.errors import InputError, RolloutError
from rollout_core.explanation import Explanation, Prediction
from rollout_core.inputs.text import EncodedText, encode_text, model_max_length, normalise_text, pad_batch, pad_token_id
from rollout_core.maths.fusion import fuse_heads
from rollout_core.maths.rollout import attention_rollout, augment_layer, layer_attention
from rollout_core.maths.sinks import SinkReport, find_sinks, sink_facts
from rollout_core.models import families
from rollout_core.models.handle import ModelHandle
from rollout_core.models.loading import load_model
from rollout_core.models.registry import DEFAULTS
from rollout_core.models.value_norms import record_value_norms
from rollout_core.options import CAPTURES, HEAD_FUSIONS, Options

METHODS = methods.names()
ZERO_SHOT_TEMPERATURE = 0.05
"""Cosine similarities are divided by this before the softmax (a logit scale of 20)."""
TOP_K = 5
TEXT_BATCH_SIZE = 16
SEQ2SEQ_MAX_NEW_TOKENS = 20

ModelArg = Union[str, "os.PathLike[str]", ModelHandle, None]
"""A registry name, local folder or hub id (loaded through the cache), or a loaded handle."""


# ----------------------------------------------------------------------------------------------
# Public API


def explain_text(
    model: ModelArg,
    text: str,
    *,
    method: str = "rollout",
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
) -> Explanation:
    """Explain one text. `model`: registry name, folder, hub id or a handle (None: default-text).

    `target`: the class label or index (classifiers, zero-shot labels; default: predicted), or the
    position whose next-token prediction is explained (causal LMs; default: the last real token), or the
    decoder position (encoder-decoders; default: the last one). `labels`: zero-shot candidate labels
    for sentence encoders.
    """
    return explain_texts(
        model, [text], method=method, target=target, head_fusion=head_fusion, residual_weight=residual_weight,
        discard_ratio=discard_ratio, start_layer=start_layer, end_layer=end_layer, keep_heads=keep_heads,
        labels=labels, max_length=max_length, capture=capture,
    )[0]


def explain_texts(
    model: ModelArg,
    texts: Sequence[str],
    *,
    method: str = "rollout",
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
) -> list[Explanation]:
    """Explain several texts, batched with padding; each result equals `explain_text` on that text.

    `target` is one target for all texts or a list with one per text.
    """
    handle = _handle(model, "text")
    if isinstance(texts, str) or not isinstance(texts, Sequence) or not texts:
        raise InputError("texts must be a non-empty list of strings")
    targets = _per_item_targets(target, len(texts))
    opts = _options(handle, method, head_fusion, residual_weight, discard_ratio, start_layer, end_layer,
                    keep_heads, capture)
    head = _text_head(handle, labels)
    limit = model_max_length(handle.processor, handle.config, families.spec_for(handle.config).position_offset,
                             max_length)
    encoded = [encode_text(handle.processor, normalise_text(t), limit) for t in texts]
    if handle.task == "seq2seq":
        return [_explain_seq2seq(handle, e, opts, t, limit) for e, t in zip(encoded, targets)]
    out: list[Explanation] = []
    for start in range(0, len(encoded), max(1, int(batch_size))):
        chunk = encoded[start : start + batch_size]
        inputs = _to_device(pad_batch(chunk, pad_token_id(handle.processor)), handle.device)
        real = inputs["attention_mask"].bool()
        result = _explain_batch(handle, inputs, real, None, head, targets[start : start + batch_size], opts)
        for b, enc in enumerate(chunk):
            out.append(_text_explanation(handle, enc, result, b, opts, limit, labels))
    return out


def explain_image(
    model: ModelArg,
    image: Any,
    *,
    method: str = "rollout",
    target: str | int | None = None,
    head_fusion: str = "mean",
    residual_weight: float = 1.0,
    discard_ratio: float = 0.0,
    start_layer: int = 0,
    end_layer: int | None = None,
    keep_heads: bool = False,
    capture: str = "auto",
) -> Explanation:
    """Explain one image (path, bytes, file object, PIL image or array). `model` None: default-image."""
    from rollout_core.inputs.images import load_image

    handle = _handle(model, "image")
    opts = _options(handle, method, head_fusion, residual_weight, discard_ratio, start_layer, end_layer,
                    keep_heads, capture)
    picture = load_image(image)
    try:
        pixels = handle.processor(images=picture, return_tensors="pt")["pixel_values"]
    except (ValueError, TypeError, RuntimeError) as err:
        raise InputError(f"the image processor could not prepare this image: {err}") from err
    height, width = int(pixels.shape[-2]), int(pixels.shape[-1])
    layout = families.image_layout(handle.config, height, width)
    inputs: dict[str, Any] = {"pixel_values": pixels.to(handle.device)}
    if _accepts(handle.model, "interpolate_pos_encoding") and (height, width) != _config_size(handle.config):
        inputs["interpolate_pos_encoding"] = True
    real = torch.ones(1, layout.num_tokens, dtype=torch.bool, device=handle.device)
    head = _image_head(handle)
    result = _explain_batch(handle, inputs, real, layout, head, [target], opts)
    if result.n != layout.num_tokens:
        raise RolloutError(
            f"the model saw {result.n} tokens, but its family layout predicts {layout.num_tokens} "
            f"({len(layout.prefix_names)} special + {layout.grid[0]}x{layout.grid[1]} patches)"
        )
    special = np.ones(layout.num_tokens, dtype=bool)
    special[layout.patch_positions.numpy()] = False
    extra = {"image_size": [height, width], "grid": list(layout.grid), "source_size": [picture.height, picture.width],
             "center_crop": bool(getattr(handle.processor, "do_center_crop", False))}
    if opts.method == "flow":
        extra["flow_approximate"] = True
    settings = _settings(handle, opts, result, 0, extra)
    return Explanation(
        kind="image", method=opts.method, model_name=handle.name, tokens=layout.tokens(), special=special,
        **result.arrays(0, layout.num_tokens), settings=settings, target_description=result.descriptions[0],
        prediction=result.predictions[0], target=result.targets[0], grid=layout.grid,
        patch_positions=layout.patch_positions.numpy(), image=processed_image(pixels[0], handle.processor),
    )


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


def _options(
    handle: ModelHandle, method: str, head_fusion: str, residual_weight: float, discard_ratio: float,
    start_layer: int, end_layer: int | None, keep_heads: bool, capture_mode: str,
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
    end = layers if end_layer is None else _layer("end_layer", end_layer, layers + 1)
    if end <= start:
        raise InputError(f"end_layer ({end}) must be greater than start_layer ({start}); the model has {layers} layers")
    if capture_mode == "lowmem" and not spec.can_stream:
        streamable = " or ".join(repr(s.name) for s in methods.all_methods() if s.can_stream)
        raise InputError(f"the low-memory capture computes {streamable} only; choose one of them or capture='full'")
    if handle.task == "seq2seq" and not spec.seq2seq:
        allowed = " or ".join(repr(s.name) for s in methods.all_methods() if s.seq2seq)
        raise InputError(f"for encoder-decoder models choose method {allowed}")
    return Options(method, head_fusion, residual, discard, start, end, bool(keep_heads), capture_mode)


def _number(name: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not np.isfinite(value):
        raise InputError(f"{name} must be a finite number, not {value!r}")
    return float(value)


def _layer(name: str, value: Any, bound: int) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise InputError(f"{name} must be an integer, not {value!r}")
    value = int(value) + (bound if value < 0 else 0)
    if not 0 <= value < bound:
        raise InputError(f"{name} {value} is out of range: the model has {bound if name == 'start_layer' else bound - 1} layers")
    return value


def _per_item_targets(target: Any, count: int) -> list[Any]:
    if isinstance(target, (list, tuple)):
        if len(target) != count:
            raise InputError(f"{len(target)} targets were given for {count} texts")
        return list(target)
    return [target] * count


# ----------------------------------------------------------------------------------------------
# Heads: what the model predicts, which class or position is explained, and the score for gradients


@dataclass
class HeadResult:
    predictions: list[list[Prediction] | None]
    targets: list[str | int | None]
    descriptions: list[str]
    score: torch.Tensor | None  # (B,) explained scores (differentiable when gradients are on)
    weights: torch.Tensor | None = None  # (B, n) explained rows, when the head decides them (causal LM)


Head = Callable[[Any, torch.Tensor, list[Any]], HeadResult]
"""(model output, real-token mask (B, n), requested targets) -> HeadResult."""


def _top(probs: torch.Tensor, names: Callable[[int], str]) -> list[Prediction]:
    values, indices = probs.detach().float().topk(min(TOP_K, probs.shape[-1]))
    return [Prediction(names(int(i)), float(v), int(i)) for v, i in zip(values.tolist(), indices.tolist())]


def _class_index(target: Any, labels: Sequence[str]) -> int | None:
    if target is None:
        return None
    if isinstance(target, (int, np.integer)) and not isinstance(target, bool):
        if -len(labels) <= int(target) < len(labels):
            return int(target) % len(labels)
    elif isinstance(target, str):
        if target in labels:
            return list(labels).index(target)
        if target.strip().lstrip("-").isdigit():
            return _class_index(int(target), labels)
    raise InputError(f"unknown target {target!r}; choose one of: {', '.join(labels)} (or an index)")


def _classifier_head(labels: Sequence[str], multi_label: bool, logits_of: Callable[[Any], torch.Tensor]) -> Head:
    def head(outputs: Any, real: torch.Tensor, targets: list[Any]) -> HeadResult:
        logits = logits_of(outputs)
        probs = torch.sigmoid(logits) if multi_label else torch.softmax(logits.float(), dim=-1)
        chosen = [_class_index(t, labels) for t in targets]
        index = [int(probs[b].argmax()) if c is None else c for b, c in enumerate(chosen)]
        score = logits[torch.arange(len(index)), torch.tensor(index, device=logits.device)]
        return HeadResult(
            predictions=[_top(p, lambda i: labels[i]) for p in probs],
            targets=[labels[i] for i in index],
            descriptions=[f"class {labels[i]!r}" + (" (predicted)" if c is None else "") for i, c in zip(index, chosen)],
            score=score,
        )
    return head


def _no_head(kind: str) -> Head:
    def head(outputs: Any, real: torch.Tensor, targets: list[Any]) -> HeadResult:
        if any(t is not None for t in targets):
            raise InputError(f"this {kind} has no classes to target" + (
                "; give zero-shot labels to get a prediction" if kind == "sentence encoder" else ""))
        size = real.shape[0]
        return HeadResult([None] * size, [None] * size, [""] * size, None)
    return head


def _causal_head(tokenizer: Any) -> Head:
    def head(outputs: Any, real: torch.Tensor, targets: list[Any]) -> HeadResult:
        positions = _causal_positions(real, targets)
        rows = torch.arange(real.shape[0], device=real.device)
        pos = torch.tensor(positions, device=real.device)
        logits = outputs.logits[rows, pos]
        probs = torch.softmax(logits.float(), dim=-1)
        best = probs.argmax(-1)
        names = lambda i: tokenizer.decode([i])  # noqa: E731
        weights = torch.zeros(real.shape, dtype=torch.float64, device=real.device)
        weights[rows, pos] = 1.0
        return HeadResult(
            predictions=[_top(p, names) for p in probs],
            targets=positions,
            descriptions=[f"next token after position {p} (predicted {names(int(i))!r})" for p, i in zip(positions, best)],
            score=logits[rows, best],
            weights=weights,
        )
    return head


def _causal_positions(real: torch.Tensor, targets: list[Any]) -> list[int]:
    """The explained position of each sample: the target, or the last real token."""
    positions = []
    for b, t in enumerate(targets):
        count = int(real[b].sum())
        if t is None:
            positions.append(count - 1)
            continue
        if isinstance(t, str) and t.strip().lstrip("-").isdigit():
            t = int(t)
        if isinstance(t, bool) or not isinstance(t, (int, np.integer)) or not -count <= int(t) < count:
            raise InputError(
                f"target must be a token position between 0 and {count - 1} (negative: from the end), not {t!r}")
        positions.append(int(t) % count)
    return positions


def _zero_shot_head(handle: ModelHandle, labels: Sequence[str]) -> Head:
    label_vectors = _sentence_embeddings(handle, list(labels)).detach()

    def head(outputs: Any, real: torch.Tensor, targets: list[Any]) -> HeadResult:
        text = _mean_pool(outputs.last_hidden_state, real)
        sims = text @ label_vectors.T  # (B, K) cosine similarities
        return _classifier_head(labels, False, lambda _: sims / ZERO_SHOT_TEMPERATURE)(outputs, real, targets)
    return head


def _mean_pool(hidden: torch.Tensor, real: torch.Tensor) -> torch.Tensor:
    mask = real.to(hidden.dtype).unsqueeze(-1)
    pooled = (hidden * mask).sum(1) / mask.sum(1).clamp_min(1.0)
    return torch.nn.functional.normalize(pooled, dim=-1)


def _sentence_embeddings(handle: ModelHandle, texts: list[str]) -> torch.Tensor:
    limit = model_max_length(handle.processor, handle.config)
    encoded = [encode_text(handle.processor, normalise_text(t), limit) for t in texts]
    inputs = _to_device(pad_batch(encoded, pad_token_id(handle.processor)), handle.device)
    with torch.no_grad():
        hidden = handle.model(**inputs).last_hidden_state
    return _mean_pool(hidden, inputs["attention_mask"].bool())


def _text_head(handle: ModelHandle, labels: Sequence[str] | None) -> Head:
    if labels is not None:
        if handle.task != "sentence-encoder":
            raise InputError("zero-shot labels need a sentence encoder (for example the embedded 'minilm')")
        if isinstance(labels, str) or not all(isinstance(x, str) and x.strip() for x in labels) or len(labels) < 2:
            raise InputError("give at least two non-empty zero-shot labels")
        if len(set(labels)) != len(labels):
            raise InputError("the zero-shot labels must be different from each other")
        return _zero_shot_head(handle, [x.strip() for x in labels])
    if handle.task == "text-classification":
        multi = getattr(handle.config, "problem_type", None) == "multi_label_classification"
        return _classifier_head(handle.labels or [], multi, lambda out: out.logits)
    if handle.task in ("causal-lm", "seq2seq"):
        return _causal_head(handle.processor)
    return _no_head("sentence encoder" if handle.task == "sentence-encoder" else "encoder")


def _image_head(handle: ModelHandle) -> Head:
    if handle.task == "image-classification":
        multi = getattr(handle.config, "problem_type", None) == "multi_label_classification"
        return _classifier_head(handle.labels or [], multi, lambda out: out.logits)
    return _no_head("backbone")


# ----------------------------------------------------------------------------------------------
# The batch core: capture, method, explained rows


@dataclass
class BatchResult:
    """Per-batch tensors (B first), cropped per sample by `arrays`."""

    n: int
    scores: torch.Tensor  # (B, n)
    layer_scores: torch.Tensor  # (L', B, n)
    layer_attention_scores: torch.Tensor  # (L', B, n)
    matrix: torch.Tensor | None  # (B, n, n)
    layer_attention: torch.Tensor | None  # (L', B, n, n); None on the low-memory path
    head_attention: torch.Tensor | None  # (L', B, H, n, n)
    predictions: list[list[Prediction] | None]
    targets: list[Any]
    descriptions: list[str]
    capture: str  # "full" | "lowmem"
    sinks: SinkReport | None = None  # attention sinks of every layer (not on the low-memory path)

    def arrays(self, b: int, n: int) -> dict[str, Any]:
        """Explanation fields of sample b, cropped to its first n positions (right padding)."""
        def np_(t: torch.Tensor | None) -> np.ndarray | None:
            return None if t is None else t.detach().to("cpu", torch.float64).numpy()
        layers = self.layer_scores.shape[0]
        return {
            "scores": np_(self.scores[b, :n]),
            "layer_scores": np_(self.layer_scores[:, b, :n]),
            "layer_attention_scores": np_(self.layer_attention_scores[:, b, :n]),
            "matrix": np_(None if self.matrix is None else self.matrix[b, :n, :n]),
            "layer_attention": np.zeros((layers, 0, n)) if self.layer_attention is None
            else np_(self.layer_attention[:, b, :n, :n]),
            "head_attention": np_(None if self.head_attention is None else self.head_attention[:, b, :, :n, :n]),
            "extras": {} if self.sinks is None else {"sinks": sink_facts(self.sinks, b, n)},
        }


def _explain_batch(
    handle: ModelHandle, inputs: dict[str, Any], real: torch.Tensor, layout: families.ImageLayout | None,
    head: Head, targets: list[Any], opts: Options,
) -> BatchResult:
    spec = families.spec_for(handle.config)
    pooling = families.head_pooling(spec, handle.config, handle.model, handle.task)
    patches = None if layout is None else layout.patch_positions.to(real.device)
    pooled = families.row_weights(pooling, real, patches)
    mask = real.long() if "attention_mask" in inputs else None
    if _use_lowmem(handle, opts, real.shape):
        return _lowmem_batch(handle, inputs, real, head, targets, opts, pooled, pooling, mask)
    found: dict[str, HeadResult] = {}
    method = methods.get(opts.method)

    def score(outputs: Any) -> torch.Tensor:
        found["head"] = head(outputs, real, targets)
        if found["head"].score is None:
            raise InputError("gradient rollout needs a score to differentiate: this model has no prediction head"
                             + (" (give zero-shot labels)" if handle.task == "sentence-encoder" else ""))
        return found["head"].score

    recorder = method.recorder(handle.model) if method.recorder else contextlib.nullcontext()
    with recorder as recorded, record_value_norms(handle.model) as value_norms:
        captured = capture.run(handle.model, inputs, num_layers=handle.num_layers,
                               score=score if method.needs_gradients else None,
                               hidden_states=method.needs_hidden_states)
    result = found.get("head") or head(captured.outputs, real, targets)
    weights = result.weights if result.weights is not None else pooled
    description = _row_description(pooling, result.weights is not None, real)
    atts = captured.attentions
    s, e = opts.start_layer, opts.end_layer
    layer_att = layer_attention(atts, head_fusion=opts.head_fusion, attention_mask=mask)[s:e]
    out = methods.compute(method, methods.MethodInput(handle, inputs, captured, opts, mask, weights,
                                                      full_matrix=layout is None, recorded=recorded))
    layer_rows, matrix = out.layer_rows, out.matrix
    scores = layer_rows[-1]
    layer_att = layer_att if out.layer_maps is None else out.layer_maps
    sinks = find_sinks(atts, value_norms.norms, mask, head_fusion=opts.head_fusion)
    w = weights.to(layer_att.dtype)
    heads = torch.stack(atts[s:e]) if opts.keep_heads else None
    return BatchResult(
        n=real.shape[1], scores=scores, layer_scores=layer_rows,
        layer_attention_scores=torch.einsum("bi,lbij->lbj", w, layer_att.to(w.dtype)),
        matrix=matrix, layer_attention=layer_att, head_attention=heads,
        predictions=result.predictions, targets=result.targets,
        descriptions=[_join(description[b], result.descriptions[b]) for b in range(real.shape[0])],
        capture="full", sinks=sinks,
    )


def _use_lowmem(handle: ModelHandle, opts: Options, shape: torch.Size) -> bool:
    if opts.capture == "full" or handle.task == "seq2seq" or not methods.get(opts.method).can_stream:
        return False
    try:
        from rollout_core import lowmem
    except ImportError:
        return False
    if opts.capture == "lowmem":
        return True
    needed = lowmem.estimate_full_capture_bytes(handle.num_layers, handle.num_heads, shape[1], shape[0])
    return needed > lowmem.memory_budget_bytes()


def _lowmem_batch(
    handle: ModelHandle, inputs: dict[str, Any], real: torch.Tensor, head: Head, targets: list[Any],
    opts: Options, pooled: torch.Tensor, pooling: str, mask: torch.Tensor | None,
) -> BatchResult:
    """The streaming path (rollout_core.lowmem): the rows of the explained positions, no per-layer matrices."""
    from rollout_core.lowmem import streaming_rollout

    positions = _causal_positions(real, targets) if handle.task == "causal-lm" else None
    weights = pooled
    if positions is not None:
        weights = torch.zeros_like(pooled)
        weights[torch.arange(real.shape[0]), torch.tensor(positions, device=real.device)] = 1.0
    rows = torch.nonzero(weights.sum(0)).flatten().tolist()
    streamed = streaming_rollout(
        handle, inputs, head_fusion=opts.head_fusion, residual_weight=opts.residual_weight,
        discard_ratio=opts.discard_ratio, start_layer=opts.start_layer, end_layer=opts.end_layer, rows=rows)
    result = head(streamed["outputs"], real, targets)
    w_rows = weights[:, rows].to(torch.float64)
    matrix = streamed["matrix"]
    layer_rows = torch.einsum("br,lbrj->lbj", w_rows, streamed["layer_rows"].double())
    description = _row_description(pooling, positions is not None, real)
    return BatchResult(
        n=real.shape[1], scores=torch.einsum("bi,bij->bj", weights.double(), matrix.double()),
        layer_scores=layer_rows,
        layer_attention_scores=torch.einsum("br,lbrj->lbj", w_rows, streamed["layer_attention_rows"].double()),
        matrix=matrix, layer_attention=None, head_attention=None,
        predictions=result.predictions, targets=result.targets,
        descriptions=[_join(description[b], result.descriptions[b]) for b in range(real.shape[0])],
        capture="lowmem",
    )


def decoder_to_source(
    decoder_attentions: Sequence[torch.Tensor], cross_attentions: Sequence[torch.Tensor], *,
    head_fusion: str = "mean", residual_weight: float = 1.0,
) -> torch.Tensor:
    """(B, m, n): share of each encoder output j in each decoder output i, rows summing to 1.

    A decoder layer l mixes decoder states with its self-attention (residual-augmented, Ã_l) and then
    adds encoder outputs through its cross-attention C_l (head-fused). In the attention-only linear
    network d_l = Ã_l d_(l-1) + C_l h_enc the encoder content of the decoder states is S_L h_enc with
    S_0 = 0, S_l = Ã_l S_(l-1) + C_l; each row of S_L sums to L and is divided by L. With one layer of
    self-attention after the cross-attention this is R_dec · C (not R_decᵀ · C); a test builds that
    network. Multiply by the encoder rollout R_enc on the right to reach the source tokens.
    """
    total = None
    for self_att, cross in zip(decoder_attentions, cross_attentions):
        mixed = augment_layer(fuse_heads(self_att, head_fusion), residual_weight=residual_weight)
        c = fuse_heads(cross, head_fusion).to(mixed.dtype)
        total = c if total is None else mixed @ total + c
    return total / len(cross_attentions)


def _explain_seq2seq(handle: ModelHandle, enc: EncodedText, opts: Options, target: Any, limit: int) -> Explanation:
    """Encoder-decoder: the greedy output is generated, then one teacher-forced pass gives encoder,
    decoder and cross-attentions. The explained row over the source is the target decoder position's row
    of `decoder_to_source`, carried through the encoder rollout (or the raw encoder layer, "attention")."""
    tokenizer = handle.processor
    inputs = _to_device(pad_batch([enc], pad_token_id(tokenizer)), handle.device)
    with torch.no_grad():
        generated = handle.model.generate(**inputs, max_new_tokens=SEQ2SEQ_MAX_NEW_TOKENS, do_sample=False,
                                          num_beams=1)
    decoder_ids = generated[:, :-1] if generated.shape[1] > 1 else generated
    captured = capture.run(handle.model, {**inputs, "decoder_input_ids": decoder_ids}, num_layers=handle.num_layers)
    real_dec = torch.ones(decoder_ids.shape, dtype=torch.bool, device=handle.device)
    result = _causal_head(tokenizer)(captured.outputs, real_dec, [target])
    position = result.targets[0]
    to_source = decoder_to_source(captured.decoder_attentions, captured.cross_attentions,
                                  head_fusion=opts.head_fusion, residual_weight=opts.residual_weight)
    s, e = opts.start_layer, opts.end_layer
    atts = captured.attentions
    layer_att = layer_attention(atts, head_fusion=opts.head_fusion)[s:e]
    cumulative = layer_att if not methods.get(opts.method).cumulative else attention_rollout(
        atts, head_fusion=opts.head_fusion, residual_weight=opts.residual_weight, discard_ratio=opts.discard_ratio,
        start_layer=s, end_layer=e, all_layers=True)
    w = to_source[:, position].to(cumulative.dtype)
    layer_rows = torch.einsum("bi,lbij->lbj", w, cumulative)
    decoder_tokens = tokenizer.convert_ids_to_tokens(decoder_ids[0].tolist())
    batch = BatchResult(
        n=len(enc.input_ids), scores=layer_rows[-1], layer_scores=layer_rows,
        layer_attention_scores=torch.einsum("bi,lbij->lbj", w, layer_att.to(w.dtype)), matrix=cumulative[-1],
        layer_attention=layer_att, head_attention=torch.stack(atts[s:e]) if opts.keep_heads else None,
        predictions=result.predictions, targets=result.targets,
        descriptions=[f"decoder position {position} ({decoder_tokens[position]!r}) carried to the source through "
                      f"the decoder self-attention and cross-attention; {result.descriptions[0]}"],
        capture="full",
    )
    decoder_rollout = attention_rollout(captured.decoder_attentions, head_fusion=opts.head_fusion,
                                        residual_weight=opts.residual_weight)
    explanation = _text_explanation(handle, enc, batch, 0, opts, limit, None)
    explanation.extras.update(
        decoder_tokens=decoder_tokens,
        generated_text=tokenizer.decode(generated[0].tolist(), skip_special_tokens=True),
        decoder_position=position,
        decoder_to_source=to_source[0].detach().cpu().double().numpy(),
        decoder_matrix=decoder_rollout[0].detach().cpu().double().numpy(),
    )
    return explanation


def _row_description(pooling: str, positional: bool, real: torch.Tensor) -> list[str]:
    if positional:
        return [""] * real.shape[0]
    if pooling == "mean":
        return [f"mean of the {int(c)} token rows" for c in real.sum(-1)]
    return [families.POOLINGS[pooling]] * real.shape[0]


def _join(*parts: str) -> str:
    return "; ".join(p for p in parts if p)


# ----------------------------------------------------------------------------------------------
# Assembling explanations


def _text_explanation(
    handle: ModelHandle, enc: EncodedText, result: BatchResult, b: int, opts: Options, limit: int,
    labels: Sequence[str] | None,
) -> Explanation:
    n = len(enc.input_ids)
    extra = {"num_tokens": n, "max_length": limit, "labels": None if labels is None else list(labels)}
    if labels is not None:
        extra["zero_shot_temperature"] = ZERO_SHOT_TEMPERATURE
    return Explanation(
        kind="text", method=opts.method, model_name=handle.name, tokens=list(enc.tokens),
        special=np.array(enc.special, dtype=bool), **result.arrays(b, n),
        settings=_settings(handle, opts, result, b, extra), target_description=result.descriptions[b],
        prediction=result.predictions[b], target=result.targets[b], text=enc.text, offsets=list(enc.offsets),
        truncation=enc.truncation,
    )


def _settings(handle: ModelHandle, opts: Options, result: BatchResult, b: int, extra: dict[str, Any]) -> dict[str, Any]:
    import transformers

    return {
        "model": handle.name, "source": handle.source, "family": handle.family, "task": handle.task,
        "method": opts.method, "head_fusion": opts.head_fusion, "residual_weight": opts.residual_weight,
        "discard_ratio": opts.discard_ratio, "start_layer": opts.start_layer, "end_layer": opts.end_layer,
        "keep_heads": opts.keep_heads, "capture": result.capture, "target": result.targets[b],
        "model_layers": handle.num_layers, "model_heads": handle.num_heads, "device": str(handle.device),
        **extra,
        "versions": {"torch": torch.__version__, "transformers": transformers.__version__,
                     "numpy": np.__version__},
    }


def processed_image(pixels: torch.Tensor, processor: Any) -> np.ndarray:
    """(3, H, W) model input -> (H, W, 3) uint8 RGB as the model saw it (normalisation and rescaling undone)."""
    x = pixels.detach().to("cpu", torch.float64)
    if getattr(processor, "do_normalize", False):
        mean = torch.as_tensor(processor.image_mean, dtype=torch.float64).view(-1, 1, 1)
        std = torch.as_tensor(processor.image_std, dtype=torch.float64).view(-1, 1, 1)
        x = x * std + mean
    if getattr(processor, "do_rescale", False):
        x = x / float(processor.rescale_factor)
    return x.permute(1, 2, 0).round().clamp(0, 255).to(torch.uint8).numpy()


def _accepts(model: torch.nn.Module, name: str) -> bool:
    return name in inspect.signature(model.forward).parameters


def _config_size(config: Any) -> tuple[int, int]:
    size = getattr(config, "image_size", None)
    return (size, size) if isinstance(size, int) else tuple(size or (0, 0))


def _to_device(batch: dict[str, torch.Tensor], device: torch.device) -> dict[str, torch.Tensor]:
    return {k: v.to(device) for k, v in batch.items()}
