"""Run a model once and collect what the explanations need: attention probabilities of every layer,
logits, and for gradient rollout the gradients of the explained score w.r.t. those probabilities.

The model is loaded with eager attention, so each layer returns the very probability tensor that
multiplies the values; `torch.autograd.grad` of the score w.r.t. those tensors gives ∂y/∂A without
touching the parameters' `.grad` (the model is shared between threads). Every layer's attention is
checked (present, shaped (B, H, n, n), finite) so that a model that silently skips them, or produces
NaN, ends in a clear error instead of a wrong map.
"""
from __future__ import annotations

import contextlib
import contextvars
import math
import threading
from dataclasses import dataclass
from typing import Any, Callable, Iterator, Mapping, Sequence

import torch

from rollout_core.errors import RolloutError, UnsupportedModelError
from rollout_core.maths.fusion import fuse_heads
from rollout_core.maths.rollout import compute_dtype

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
    stacked: torch.Tensor | None = None  # (L, B, 1, n, n) heads fused in the forward pass: `attentions` are its layers

    @property
    def maths_attentions(self) -> tuple[torch.Tensor, ...] | torch.Tensor:
        """The attentions as the maths take them (`maths.rollout.Attentions`): the stacked tensor when heads were
        fused in the forward pass (copied in one call, not layer by layer), else the per-layer tuple."""
        return self.attentions if self.stacked is None else self.stacked


def run(
    model: torch.nn.Module,
    inputs: Mapping[str, Any],
    *,
    num_layers: int,
    score: ScoreFn | None = None,
    hidden_states: bool = False,
    head_fusion: str | None = None,
) -> Captured:
    """Forward `inputs` (already on the model's device) with attentions; gradients when `score` is given;
    every layer's hidden states in `outputs.hidden_states` when `hidden_states` (with `score`, also the
    gradient w.r.t. the encoder's input, hidden_states[0], in `input_gradients`).

    `head_fusion` (without `score`): each layer's heads are fused inside the forward pass, so the attentions come
    back as (B, 1, n, n) (`fused_heads`) and no layer's per-head probabilities outlive it; for maths that reads
    attention only through `fuse_heads` with that same fusion, which gives the same numbers on one head."""
    grad = score is not None
    fusing = fused_heads(model, head_fusion) if head_fusion is not None and not grad else contextlib.nullcontext()
    with torch.set_grad_enabled(grad), fusing:
        extra = {"output_hidden_states": True} if hidden_states else {}
        outputs = forward(model, inputs, output_attentions=True, return_dict=True, **extra)
    seq2seq = getattr(model.config, "is_encoder_decoder", False)
    attentions = outputs.encoder_attentions if seq2seq else outputs.attentions
    n = _sequence_length(inputs, attentions)
    stacked = None if seq2seq or grad or head_fusion is None else _stacked(attentions)
    if stacked is not None:  # one tensor: the checks and the maths read it at once, not layer by layer
        attentions = outputs.attentions = stacked.unbind(0)
    attentions = check_attentions(attentions, num_layers, n, "self-attention", stacked)
    captured = Captured(attentions=attentions, outputs=outputs, logits=getattr(outputs, "logits", None),
                        stacked=stacked)
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


_FUSION: contextvars.ContextVar[str | None] = contextvars.ContextVar("rollout_head_fusion", default=None)
"""The head fusion the attention hooks apply on this thread's forward passes (None: they leave outputs alone)."""
_INSTALL = threading.Lock()
_HOOKED = "_rollout_fusing_hooks"


@contextlib.contextmanager
def fused_heads(model: torch.nn.Module, how: str) -> Iterator[None]:
    """For the duration, on this thread only, every attention module whose output transformers collects as
    `attentions` hands on its probabilities fused over heads in the compute dtype, (B, 1, n, n): `fuse_heads`
    applied as each layer finishes, so the per-head (B, H, n, n) tensor is freed with the layer (the naive
    `output_attentions=True` keeps all L of them). Fusing one head again is the identity (mean, max and min
    alike), so maths that fuses with `how` gives the same numbers; NaN and infinity survive the fusion, so
    `check_attentions` still sees them. A model whose attention modules transformers does not name is left
    alone (its attentions come back per head)."""
    _install_fusing_hooks(model)
    token = _FUSION.set(how)
    try:
        yield
    finally:
        _FUSION.reset(token)


def _install_fusing_hooks(model: torch.nn.Module) -> None:
    """Once per model: a hook first in line on each module that `attentions` are recorded from (inactive unless
    `fused_heads` is on for the calling thread; a context variable, so sessions sharing the model see nothing)."""
    if getattr(model, _HOOKED, False):
        return
    with _INSTALL:
        if getattr(model, _HOOKED, False):
            return
        for module, index in attention_outputs(model):
            module.register_forward_hook(_fusing_hook(index), prepend=True)
        setattr(model, _HOOKED, True)


def _fusing_hook(index: int) -> Callable[..., Any]:
    def hook(module: torch.nn.Module, args: Any, output: Any) -> Any:
        how = _FUSION.get()
        if how is None or not isinstance(output, tuple) or not -len(output) <= index < len(output):
            return None
        at = index % len(output)
        probs = output[at]
        if not isinstance(probs, torch.Tensor) or probs.dim() != 4 or probs.shape[1] == 1:
            return None
        dtype = compute_dtype(probs.dtype)  # converted only when it is not the compute dtype already
        fused = fuse_heads(probs if probs.dtype == dtype else probs.to(dtype), how, keepdim=True)
        return output[:at] + (fused,) + output[at + 1:]

    return hook


def attention_outputs(model: torch.nn.Module) -> list[tuple[torch.nn.Module, int]]:
    """(module, index of its output) pairs whose outputs transformers collects as `attentions`: the
    `_can_record_outputs` of the model and of each sub-model over its own modules, matched as transformers'
    `recursively_install_hooks` matches them (class, module path, class-name suffix). None for a model that is
    not a transformers model."""
    try:
        from transformers.modeling_utils import PreTrainedModel
        from transformers.utils.output_capturing import _CAN_RECORD_REGISTRY, OutputRecorder
    except ImportError:
        return []

    def specs_of(sub: torch.nn.Module) -> list[Any]:
        specs = _CAN_RECORD_REGISTRY.get(sub).get("attentions") if isinstance(sub, PreTrainedModel) else None
        specs = [] if specs is None else specs if isinstance(specs, list) else [specs]
        return [s if isinstance(s, OutputRecorder) else OutputRecorder(target_class=s, index=1) if isinstance(s, type)
                else OutputRecorder(target_class=None, index=1, class_name=s) for s in specs]

    def matches(spec: Any, module: torch.nn.Module, path: str) -> bool:
        if spec.target_class is not None and isinstance(module, spec.target_class):
            return spec.layer_name is None or f".{spec.layer_name.strip('.')}." in path + "."
        return spec.class_name is not None and path.endswith(spec.class_name)

    found: list[tuple[torch.nn.Module, int]] = []

    def walk(module: torch.nn.Module, path: str, specs: list[Any]) -> None:
        for name, child in module.named_children():
            walk(child, f"{path}.{name}", specs_of(child) if isinstance(child, PreTrainedModel) else specs)
        found.extend((module, spec.index) for spec in specs if matches(spec, module, path))

    walk(model, "", specs_of(model))
    return found


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


def _stacked(attentions: Sequence[torch.Tensor | None] | None) -> torch.Tensor | None:
    """The layers' head-fused attentions, (B, 1, n, n) each, as one (L, B, 1, n, n) tensor; None when they are not
    all such tensors of one shape and dtype (a model whose attention modules were not fused, a failed layer)."""
    if not attentions or any(not isinstance(a, torch.Tensor) for a in attentions):
        return None
    first = attentions[0]
    if first.dim() != 4 or first.shape[1] != 1 or any(a.shape != first.shape or a.dtype != first.dtype
                                                       for a in attentions):
        return None
    return torch.stack(tuple(attentions))


def check_attentions(
    attentions: Sequence[torch.Tensor | None] | None, num_layers: int, n: int | tuple[int, int], what: str,
    stacked: torch.Tensor | None = None,
) -> tuple[torch.Tensor, ...]:
    """Every layer returned a finite (B, H, q, k) tensor; a clear error otherwise. `stacked`: the layers as one
    tensor (`Captured.stacked`), whose per-layer sums are one call."""
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
    layer = _first_non_finite(attentions, stacked)
    if layer is not None:
        raise UnsupportedModelError(
            f"the model produced NaN or infinite {what} weights in layer {layer}: its weights or this input "
            "overflow (try float32, or check the model files)"
        )
    return tuple(attentions)


def _first_non_finite(layers: Sequence[torch.Tensor], stacked: torch.Tensor | None = None) -> int | None:
    """The first layer holding NaN or infinity, or None: one sum decides when every layer is finite (NaN and
    infinity make a sum so); the element-wise test runs only when the sum is not (or overflowed). `stacked`
    (floating point, the layers stacked): that sum in one call; else the sum of the per-layer sums."""
    if stacked is not None and stacked.is_floating_point():
        total = stacked.sum(dtype=compute_dtype(stacked.dtype))
    else:
        total = torch.stack([a.sum(dtype=compute_dtype(a.dtype)) if a.is_floating_point() else a.sum().double()
                             for a in layers]).sum()
    if math.isfinite(total.item()):  # .item(): no autograd warning when the attentions carry gradients
        return None
    return next((layer for layer, a in enumerate(layers) if not bool(torch.isfinite(a).all())), None)
