"""The two ways a streaming capture reaches each layer's probabilities, chosen per model family.

- Attention interface: "rollout_stream" (`attention.stream_attention`) is registered for the duration of
  the call and every config of the model points at it.
- Forward hooks (families that compute attention inline): the model runs eagerly with
  `output_attentions=True`; a hook on each innermost attention module takes that layer's probabilities,
  folds them in and hands `None` on, so at most one layer's (B, heads, n, n) tensor is alive at a time.
"""
from __future__ import annotations

import contextlib
import functools
import inspect
import sys
from typing import Any, Callable, Iterator

import torch

from rollout_core.errors import UnsupportedModelError
from rollout_core.lowmem.accumulator import ACTIVE, LOCK
from rollout_core.lowmem.attention import stream_attention
from rollout_core.maths.fusion import fuse_heads

STREAM_IMPLEMENTATION = "rollout_stream"
"""Name under which the streaming attention function is registered while a capture runs."""

_INTERFACE_MARK = "ALL_ATTENTION_FUNCTIONS.get_interface("


def uses_attention_interface(model: torch.nn.Module) -> bool:
    """True when the model's attention goes through transformers' AttentionInterface.

    The same test transformers applies before letting an implementation be switched: the module
    defining the model class calls `ALL_ATTENTION_FUNCTIONS.get_interface(`.
    """
    for cls in type(model).__mro__:
        if cls.__module__.startswith("transformers.models.") and cls.__module__ in sys.modules:
            return _module_uses_interface(cls.__module__)
    return False


@functools.lru_cache(maxsize=None)
def _module_uses_interface(name: str) -> bool:
    try:
        return _INTERFACE_MARK in inspect.getsource(sys.modules[name])
    except (OSError, TypeError):
        return False


# ----------------------------------------------------------------------------------------------
# Path 1: the attention interface


def _mask_function(compact: bool) -> Callable[..., Any]:
    """Masks for the streaming implementation: eager's additive float masks, or SDPA's (`compact`).

    Eager's format is safe in both directions if another thread's forward crosses the switch:
    SDPA, eager and `block_probabilities` all read additive float masks. But it is a float (n, n) per
    sample, 4 GiB at 32k tokens; the row-only mode takes SDPA's: none at all for an unpadded causal input
    (the causal rule is applied block by block), else one byte per entry.
    """
    from transformers.masking_utils import eager_mask, sdpa_mask

    return sdpa_mask if compact else eager_mask


@contextlib.contextmanager
def streaming_implementation(model: torch.nn.Module, compact_mask: bool = False) -> Iterator[None]:
    """Point every config of `model` at "rollout_stream" for the duration, then restore everything."""
    from transformers import PretrainedConfig
    from transformers.masking_utils import AttentionMaskInterface
    from transformers.modeling_utils import AttentionInterface

    with LOCK:
        registered = STREAM_IMPLEMENTATION not in AttentionInterface._global_mapping
        AttentionInterface._global_mapping[STREAM_IMPLEMENTATION] = stream_attention
        AttentionMaskInterface._global_mapping[STREAM_IMPLEMENTATION] = _mask_function(compact_mask)
        configs = {id(m.config): m.config for m in model.modules()
                   if isinstance(getattr(m, "config", None), PretrainedConfig)}
        saved = {key: cfg._attn_implementation_internal for key, cfg in configs.items()}
        try:
            for cfg in configs.values():
                cfg._attn_implementation_internal = STREAM_IMPLEMENTATION
            yield
        finally:
            for key, cfg in configs.items():
                cfg._attn_implementation_internal = saved[key]
            if registered:
                AttentionInterface._global_mapping.pop(STREAM_IMPLEMENTATION, None)
                AttentionMaskInterface._global_mapping.pop(STREAM_IMPLEMENTATION, None)


# ----------------------------------------------------------------------------------------------
# Path 2: forward hooks, for families that compute attention inline


def _innermost_attention_modules(model: torch.nn.Module) -> list[torch.nn.Module]:
    """Modules whose class name says Attention and that contain no other such module."""
    named = [m for m in model.modules() if "attention" in type(m).__name__.lower()]
    inner = []
    for module in named:
        if not any(child is not module and "attention" in type(child).__name__.lower() for child in module.modules()):
            inner.append(module)
    return inner


def _take_probabilities(output: Any) -> tuple[Any, torch.Tensor | None]:
    """Find the (B, H, n, n) probabilities in a module's output tuple; return the output without them."""
    if not isinstance(output, tuple):
        return output, None
    for index, item in enumerate(output):
        if isinstance(item, torch.Tensor) and item.dim() == 4 and item.shape[-1] == item.shape[-2]:
            return output[:index] + (None,) + output[index + 1 :], item
    return output, None


def _hook(module: torch.nn.Module, args: Any, output: Any) -> Any:
    accumulator = ACTIVE.get()
    if accumulator is None:
        return output
    output, probs = _take_probabilities(output)
    if probs is None:
        return output
    layer = accumulator.next_layer()
    if accumulator.wants(layer):
        accumulator.add(fuse_heads(probs.float(), how=accumulator.head_fusion))
    return output


@contextlib.contextmanager
def attention_hooks(model: torch.nn.Module) -> Iterator[None]:
    """Hook the innermost attention modules for the duration; the model runs eagerly (its own masks)."""
    modules = _innermost_attention_modules(model)
    if not modules:
        raise UnsupportedModelError(
            f"Low-memory capture found no attention modules in {type(model).__name__}; use capture='full'."
        )
    with LOCK:
        handles = [m.register_forward_hook(_hook) for m in modules]
        try:
            yield
        finally:
            for h in handles:
                h.remove()
