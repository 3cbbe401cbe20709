"""Run a model once and collect what the explanations need: attention probabilities of every layer,
logits, and for gradient rollout the gradients of the explained score w.r.t. those probabilities.

The model is loaded with eager attention, so each layer returns the very probability tensor that
multiplies the values; `torch.autograd.grad` of the score w.r.t. those tensors gives ∂y/∂A without
touching the parameters' `.grad` (the model is shared between threads). Every layer's attention is
checked (present, shaped (B, H, n, n), finite) so that a model that silently skips them, or produces
NaN, ends in a clear error instead of a wrong map.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Mapping, Sequence

import torch

from rollout_core.errors import RolloutError, UnsupportedModelError

ScoreFn = Callable[[Any], torch.Tensor]
"""Maps the model output to the (B,) explained scores (one per sample) whose gradients are wanted."""


@dataclass
class Captured:
    """Attentions and outputs of one forward pass over a batch."""

    attentions: tuple[torch.Tensor, ...]  # L x (B, H, n, n): self-attention (the encoder's for seq2seq)
    outputs: Any
    logits: torch.Tensor | None
    gradients: tuple[torch.Tensor, ...] | None = None  # like `attentions`, for method="gradient"
    decoder_attentions: tuple[torch.Tensor, ...] | None = None  # seq2seq: L_dec x (B, H, m, m)
    cross_attentions: tuple[torch.Tensor, ...] | None = None  # seq2seq: L_dec x (B, H, m, n)
    input_gradients: torch.Tensor | None = None  # (B, n, d) d score / d hidden_states[0], with gradients + states


def run(
    model: torch.nn.Module,
    inputs: Mapping[str, Any],
    *,
    num_layers: int,
    score: ScoreFn | None = None,
    hidden_states: bool = False,
) -> Captured:
    """Forward `inputs` (already on the model's device) with attentions; gradients when `score` is given;
    every layer's hidden states in `outputs.hidden_states` when `hidden_states` (with `score`, also the
    gradient w.r.t. the encoder's input, hidden_states[0], in `input_gradients`)."""
    grad = score is not None
    with torch.set_grad_enabled(grad):
        extra = {"output_hidden_states": True} if hidden_states else {}
        outputs = forward(model, inputs, output_attentions=True, return_dict=True, **extra)
    seq2seq = getattr(model.config, "is_encoder_decoder", False)
    attentions = outputs.encoder_attentions if seq2seq else outputs.attentions
    n = _sequence_length(inputs, attentions)
    attentions = check_attentions(attentions, num_layers, n, "self-attention")
    captured = Captured(attentions=attentions, outputs=outputs, logits=getattr(outputs, "logits", None))
    if seq2seq:
        m = inputs["decoder_input_ids"].shape[-1]
        layers = len(outputs.decoder_attentions or ())
        captured.decoder_attentions = check_attentions(outputs.decoder_attentions, layers, m, "decoder self-attention")
        captured.cross_attentions = check_attentions(outputs.cross_attentions, layers, (m, n), "cross-attention")
    if grad:
        values = score(outputs)
        embedded = (outputs.hidden_states[0],) if hidden_states and not seq2seq else ()
        found = torch.autograd.grad(values.sum(), tuple(attentions) + embedded, allow_unused=True)
        if embedded:
            captured.input_gradients, found = found[-1], found[:-1]
        if any(g is None for g in found):
            raise UnsupportedModelError(
                "the attention weights this model returns are not the ones its forward pass uses, so their "
                "gradients cannot be taken; choose rollout or flow for this model"
            )
        captured.gradients = tuple(g.detach() for g in found)
        captured.attentions = tuple(a.detach() for a in attentions)
        captured.logits = None if captured.logits is None else captured.logits.detach()
    return captured


def forward(model: torch.nn.Module, inputs: Mapping[str, Any], **options: Any) -> Any:
    """`model(**inputs, **options)`; a failure of the model's own code is an UnsupportedModelError (the
    full and the streaming capture both call this, so a failing model reads the same on either)."""
    try:
        return model(**inputs, **options)
    except RolloutError:
        raise
    except (RuntimeError, ValueError, IndexError, TypeError) as err:
        raise UnsupportedModelError(f"the model failed on this input: {err}") from err


def _sequence_length(inputs: Mapping[str, Any], attentions: Sequence[torch.Tensor] | None) -> int:
    ids = inputs.get("input_ids")
    if isinstance(ids, torch.Tensor):
        return int(ids.shape[-1])
    if attentions:  # images: the token count follows from the patch grid; checked by the caller
        first = attentions[0]
        if isinstance(first, torch.Tensor):
            return int(first.shape[-1])
    return -1


def check_attentions(
    attentions: Sequence[torch.Tensor | None] | None, num_layers: int, n: int | tuple[int, int], what: str
) -> tuple[torch.Tensor, ...]:
    """Every layer returned a finite (B, H, q, k) tensor; a clear error otherwise."""
    if not attentions or all(a is None for a in attentions):
        raise UnsupportedModelError(
            f"the model returned no {what} weights (fused attention such as SDPA or flash attention does not "
            "return them, and some architectures never do); it cannot be explained with attention"
        )
    if len(attentions) != num_layers:
        raise UnsupportedModelError(f"the model returned {what} weights for {len(attentions)} of {num_layers} layers")
    q, k = (n, n) if isinstance(n, int) else n
    for layer, att in enumerate(attentions):
        if att is None:
            raise UnsupportedModelError(f"layer {layer} returned no {what} weights")
        if att.dim() != 4 or att.shape[-2:] != (q, k):
            raise UnsupportedModelError(
                f"layer {layer} returned {what} weights of shape {tuple(att.shape)}, expected (batch, heads, {q}, {k})"
            )
        if not torch.isfinite(att).all():
            raise UnsupportedModelError(
                f"the model produced NaN or infinite {what} weights in layer {layer}: its weights or this input "
                "overflow (try float32, or check the model files)"
            )
    return tuple(attentions)
