"""Per-family access to the self-attention internals that contribution measures need, and one-pass recording.

`layer_access(model)` names, per layer, the q/k/v/o projections, the head count, the layer norm the attention
block's output passes through (post-LN: BERT, DistilBERT, RoBERTa) or its input passes through (pre-LN: ViT, DeiT,
DINOv2, with DINOv2's layerscale). `recording(model)` hooks those modules so that one ordinary forward pass with
`output_attentions=True` (eager attention) records what the norm-based and ALTI measures need.
"""
from __future__ import annotations

import weakref
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Iterator

import torch
from torch import nn

from rollout_core.errors import UnsupportedModelError
from rollout_core.models.thread_hooks import own_thread

_POST_LN = ("bert", "roberta", "xlm-roberta", "camembert", "electra", "distilbert")
_PRE_LN = ("vit", "deit", "dinov2", "dinov2_with_registers")
SUPPORTED_FAMILIES = _POST_LN + _PRE_LN
"""The model types (config.model_type) whose layers `layer_access` can read."""


@dataclass(frozen=True)
class LayerAccess:
    """One layer's attention block: projections, heads, layer norm, layerscale and the modules to hook."""

    query: nn.Linear
    key: nn.Linear
    value: nn.Linear
    output: nn.Linear
    num_heads: int
    norm: nn.LayerNorm  # post-LN: the norm after attention + residual; pre-LN: the norm before attention
    post_ln: bool
    layer: nn.Module  # its input is the residual stream x
    attention: nn.Module  # returns (context or output, attention probabilities)
    block_output: nn.Module  # post-LN: output is the block output; pre-LN: input is x + scale * attn(LN(x))
    layer_scale: torch.Tensor | None = None  # DINOv2 lambda1


@dataclass
class Recorded:
    """What one forward pass recorded, per layer (lists in layer order)."""

    layers: list[LayerAccess]
    residual: list[torch.Tensor] = field(default_factory=list)  # layer input x, (B, n, d)
    attn_input: list[torch.Tensor] = field(default_factory=list)  # attention input (x or LN1(x)), (B, n, d)
    probs: list[torch.Tensor] = field(default_factory=list)  # (B, H, n, n)
    block_out: list[torch.Tensor] = field(default_factory=list)  # real attention-block output, (B, n, d)


def _layers(model: nn.Module, family: str) -> list[LayerAccess]:
    base = getattr(model, "base_model", model)
    heads = model.config.num_attention_heads if family != "distilbert" else model.config.n_heads
    if family == "distilbert":
        return [LayerAccess(b.attention.q_lin, b.attention.k_lin, b.attention.v_lin, b.attention.out_lin, heads,
                            b.sa_layer_norm, True, b, b.attention, b.sa_layer_norm)
                for b in base.transformer.layer]
    if family in _POST_LN:
        return [LayerAccess(b.attention.self.query, b.attention.self.key, b.attention.self.value,
                            b.attention.output.dense, heads, b.attention.output.LayerNorm, True, b,
                            b.attention.self, b.attention.output.LayerNorm)
                for b in base.encoder.layer]
    if family in ("vit", "deit"):
        return [LayerAccess(b.attention.q_proj, b.attention.k_proj, b.attention.v_proj, b.attention.o_proj, heads,
                            b.layernorm_before, False, b, b.attention, b.layernorm_after)
                for b in base.layers]
    return [LayerAccess(b.attention.q_proj, b.attention.k_proj, b.attention.v_proj, b.attention.o_proj, heads,
                        b.norm1, False, b, b.attention, b.norm2, b.layer_scale1.lambda1)
            for b in base.encoder.layer]


def supports(model: nn.Module) -> bool:
    """Whether `layer_access` can read this model's layers."""
    return getattr(getattr(model, "config", None), "model_type", None) in SUPPORTED_FAMILIES


def unsupported(model: nn.Module, purpose: str = "This method") -> UnsupportedModelError | None:
    """The error naming the supported families when `layer_access` cannot read this model's layers, else None.
    `purpose` starts the message ("Value zeroing", "ALTI rollout", ...)."""
    family = getattr(getattr(model, "config", None), "model_type", type(model).__name__)
    if family in SUPPORTED_FAMILIES:
        return None
    return UnsupportedModelError(f"{purpose} needs the layers of a BERT-like or ViT-like encoder (model types "
                                 f"{', '.join(SUPPORTED_FAMILIES)}); this model is '{family}'")


_FOUND: "weakref.WeakKeyDictionary[nn.Module, list[LayerAccess]]" = weakref.WeakKeyDictionary()
"""layer_access's answer per model: the modules of a loaded model do not change, and naming them took 0.2-0.3 ms
(12 layers) on every explanation (value norms for the sinks)."""


def layer_access(model: nn.Module, purpose: str = "This method") -> list[LayerAccess]:
    """Each layer's attention internals, or the `unsupported` error naming the supported families."""
    error = unsupported(model, purpose)
    if error is not None:
        raise error
    found = _FOUND.get(model)
    if found is None:
        found = _FOUND[model] = _layers(model, model.config.model_type)
    return list(found)


def _first_input(args: tuple, kwargs: dict[str, Any]) -> torch.Tensor:
    return args[0] if args else kwargs["hidden_states"]


@contextmanager
def recording(model: nn.Module, purpose: str = "This method") -> Iterator[Recorded]:
    """Hooks recording, during any forward pass of this thread inside the block, the states the contribution
    measures need."""
    rec = Recorded(layer_access(model, purpose))
    handles = []
    for acc in rec.layers:
        handles.append(acc.layer.register_forward_pre_hook(
            own_thread(lambda m, a, k: rec.residual.append(_first_input(a, k).detach())), with_kwargs=True))
        handles.append(acc.attention.register_forward_pre_hook(
            own_thread(lambda m, a, k: rec.attn_input.append(_first_input(a, k).detach())), with_kwargs=True))
        handles.append(acc.attention.register_forward_hook(
            own_thread(lambda m, a, out: rec.probs.append(out[1].detach()))))
        if acc.post_ln:
            handles.append(acc.block_output.register_forward_hook(
                own_thread(lambda m, a, out: rec.block_out.append(out.detach()))))
        else:
            handles.append(acc.block_output.register_forward_pre_hook(
                own_thread(lambda m, a: rec.block_out.append(a[0].detach()))))
    try:
        yield rec
    finally:
        for h in handles:
            h.remove()
