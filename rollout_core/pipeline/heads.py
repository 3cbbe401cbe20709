"""Heads: what the model predicts, which class or position is explained, and the score for gradients.

Zero-shot labels (sentence encoders): prediction = softmax(cos(text, label) / ZERO_SHOT_TEMPERATURE)
over the labels, with mean-pooled, L2-normalised embeddings of the text and of each label.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Callable, Sequence

import numpy as np
import torch

from rollout_core.calibration import calibrated_probabilities
from rollout_core.errors import InputError
from rollout_core.explanation_data import Prediction
from rollout_core.inputs.text import encode_texts, model_max_length, normalise_text, pad_batch, pad_token_id
from rollout_core.models.handle import ModelHandle
from rollout_core.pipeline import to_device

ZERO_SHOT_TEMPERATURE = 0.05
"""Cosine similarities are divided by this before the softmax (a logit scale of 20)."""
TOP_K = 5


@dataclass
class HeadResult:
    predictions: list[list[Prediction] | None]
    targets: list[str | int | None]
    descriptions: list[str]
    score: torch.Tensor | None  # (B,) explained scores (differentiable when gradients are on)
    weights: torch.Tensor | None = None  # (B, n) explained rows, when the head decides them (causal LM)
    classes: torch.Tensor | None = None  # (B,) each sample's explained class among the model's own logits
    logits: torch.Tensor | None = None  # (B, C) the model's own class logits (classifiers), before calibration


Head = Callable[[Any, torch.Tensor, list[Any]], HeadResult]
"""(model output, real-token mask (B, n), requested targets) -> HeadResult."""


def _tops(probs: torch.Tensor, names: Callable[[int], str]) -> list[list[Prediction]]:
    """Each row's top predictions, (B, C) probabilities: one topk and one conversion for the batch."""
    probs = probs.detach() if probs.requires_grad else probs
    values, indices = (probs if probs.dtype == torch.float32 else probs.float()).topk(min(TOP_K, probs.shape[-1]),
                                                                                       dim=-1)
    return [[Prediction(names(int(i)), float(v), int(i)) for v, i in zip(row_values, row_indices)]
            for row_values, row_indices in zip(values.tolist(), indices.tolist())]


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


def classifier_head(labels: Sequence[str], multi_label: bool, logits_of: Callable[[Any], torch.Tensor],
                    temperature: float | None = None) -> Head:
    """`temperature` (a single-label classifier's calibration, `calibration.config_temperature`): the reported
    probabilities are `calibration.calibrated_probabilities`; the explained class and the score are not changed."""
    def head(outputs: Any, real: torch.Tensor, targets: list[Any]) -> HeadResult:
        logits = logits_of(outputs)
        probs = torch.sigmoid(logits) if multi_label else torch.softmax(
            logits if logits.dtype == torch.float32 else logits.float(), dim=-1)
        chosen = [_class_index(t, labels) for t in targets]
        predicted = probs.argmax(-1)
        index = [p if c is None else c for p, c in zip(predicted.tolist(), chosen)]
        classes = predicted if all(c is None for c in chosen) else torch.tensor(index, device=logits.device)
        shown = probs if temperature is None else calibrated_probabilities(logits, temperature)
        return HeadResult(
            predictions=_tops(shown, lambda i: labels[i]),
            targets=[labels[i] for i in index],
            descriptions=[f"class {labels[i]!r}" + (" (predicted)" if c is None else "")
                          for i, c in zip(index, chosen)],
            score=logits[torch.arange(len(index)), classes],
            classes=classes,
            logits=logits.detach() if logits.requires_grad else logits,
        )
    return head


def no_head(kind: str) -> Head:
    def head(outputs: Any, real: torch.Tensor, targets: list[Any]) -> HeadResult:
        if any(t is not None for t in targets):
            raise InputError(f"this {kind} has no classes to target" + (
                "; give zero-shot labels to get a prediction" if kind == "sentence encoder" else ""))
        size = real.shape[0]
        return HeadResult([None] * size, [None] * size, [""] * size, None)
    return head


def causal_head(tokenizer: Any) -> Head:
    def head(outputs: Any, real: torch.Tensor, targets: list[Any]) -> HeadResult:
        positions = causal_positions(real, targets)
        rows = torch.arange(real.shape[0], device=real.device)
        pos = torch.tensor(positions, device=real.device)
        logits = outputs.logits[rows, pos]
        probs = torch.softmax(logits.float(), dim=-1)
        best = probs.argmax(-1)
        names = lambda i: tokenizer.decode([i])  # noqa: E731
        weights = torch.zeros(real.shape, dtype=torch.float64, device=real.device)
        weights[rows, pos] = 1.0
        return HeadResult(
            predictions=_tops(probs, names),
            targets=positions,
            descriptions=[f"next token after position {p} (predicted {names(int(i))!r})"
                          for p, i in zip(positions, best)],
            score=logits[rows, best],
            weights=weights,
        )
    return head


def causal_positions(real: torch.Tensor, targets: list[Any]) -> list[int]:
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


def zero_shot_head(handle: ModelHandle, labels: Sequence[str]) -> Head:
    label_vectors = _sentence_embeddings(handle, list(labels)).detach()

    def head(outputs: Any, real: torch.Tensor, targets: list[Any]) -> HeadResult:
        text = _mean_pool(outputs.last_hidden_state, real)
        sims = text @ label_vectors.T  # (B, K) cosine similarities
        result = classifier_head(labels, False, lambda _: sims / ZERO_SHOT_TEMPERATURE)(outputs, real, targets)
        shown = sims.detach().tolist()  # read once; the explained score keeps its graph for the gradient methods
        predictions = [[dataclasses.replace(p, similarity=shown[b][p.index]) for p in top]
                       for b, top in enumerate(result.predictions)]
        # its classes are the zero-shot labels, not model logits
        return dataclasses.replace(result, predictions=predictions, classes=None, logits=None)
    return head


def _mean_pool(hidden: torch.Tensor, real: torch.Tensor) -> torch.Tensor:
    mask = real.to(hidden.dtype).unsqueeze(-1)
    pooled = (hidden * mask).sum(1) / mask.sum(1).clamp_min(1.0)
    return torch.nn.functional.normalize(pooled, dim=-1)


def _sentence_embeddings(handle: ModelHandle, texts: list[str]) -> torch.Tensor:
    limit = model_max_length(handle.processor, handle.config)
    encoded = encode_texts(handle.processor, [normalise_text(t) for t in texts], limit)
    inputs = to_device(pad_batch(encoded, pad_token_id(handle.processor)), handle.device)
    with torch.no_grad():
        hidden = handle.model(**inputs).last_hidden_state
    return _mean_pool(hidden, inputs["attention_mask"].bool())


def text_head(handle: ModelHandle, labels: Sequence[str] | None, temperature: float | None = None) -> Head:
    """The head of a text model; `temperature` calibrates a single-label classifier's reported probabilities."""
    if labels is not None:
        if handle.task != "sentence-encoder":
            raise InputError("zero-shot labels need a sentence encoder (for example the embedded 'minilm')")
        if isinstance(labels, str) or not all(isinstance(x, str) and x.strip() for x in labels) or len(labels) < 2:
            raise InputError("give at least two non-empty zero-shot labels")
        if len(set(labels)) != len(labels):
            raise InputError("the zero-shot labels must be different from each other")
        return zero_shot_head(handle, [x.strip() for x in labels])
    if handle.task == "text-classification":
        multi = getattr(handle.config, "problem_type", None) == "multi_label_classification"
        return classifier_head(handle.labels or [], multi, lambda out: out.logits, None if multi else temperature)
    if handle.task in ("causal-lm", "seq2seq"):
        return causal_head(handle.processor)
    return no_head("sentence encoder" if handle.task == "sentence-encoder" else "encoder")


def image_head(handle: ModelHandle) -> Head:
    if handle.task == "image-classification":
        multi = getattr(handle.config, "problem_type", None) == "multi_label_classification"
        return classifier_head(handle.labels or [], multi, lambda out: out.logits)
    return no_head("backbone")
