"""Value norms during the ordinary forward pass: a forward hook on each layer's value projection.

The projections come from rollout_core.models.layer_access (BERT-like and ViT-like encoders); other families
give None: the attention-only sink criterion is used.
"""
from __future__ import annotations

import contextvars
import threading
import weakref
from contextlib import contextmanager
from typing import Any, Iterator

import torch

from rollout_core.models.layer_access import layer_access, supports


def value_projections(model: torch.nn.Module) -> list[torch.nn.Linear] | None:
    """The value projection of every layer, in layer order, or None for an unsupported family."""
    return [acc.value for acc in layer_access(model)] if supports(model) else None


class ValueNorms:
    """Filled by `record_value_norms`: `.norms` is (L, B, n), mean over heads of ||v_j||, or None."""

    def __init__(self) -> None:
        self.layers: list[torch.Tensor] = []  # each layer's value projection output (B, n, d), as recorded
        self.heads = 1
        self.supported = False

    @property
    def norms(self) -> torch.Tensor | None:
        """Computed from the recorded outputs in one batched step (a few torch calls per layer inside the forward
        pass showed in a short text's explanation time)."""
        if not (self.supported and self.layers):
            return None
        values = torch.stack(self.layers)
        values = values if values.dtype == torch.float32 else values.float()
        layers, batch, n, hidden = values.shape
        per_head = values.view(layers, batch, n, self.heads, hidden // self.heads)
        return torch.linalg.vector_norm(per_head, dim=-1).mean(-1)


_RECORDING: contextvars.ContextVar[tuple[tuple[dict[int, int], ValueNorms], ...]] = contextvars.ContextVar(
    "rollout_value_norms", default=())
"""The recordings open on this thread: each maps id(value projection) -> layer for its model, and the ValueNorms it
fills (nested blocks each get every forward pass of their model). Empty: the hooks do nothing."""
_INSTALL = threading.Lock()
_HOOKED: "weakref.WeakKeyDictionary[torch.nn.Module, bool]" = weakref.WeakKeyDictionary()


@contextmanager
def record_value_norms(model: torch.nn.Module) -> Iterator[ValueNorms]:
    """Within the block, every forward of `model` on this thread records per-token value norms (only the last
    forward is kept). The hook is put on the model's value projections once (registering and removing hooks on
    every explanation showed in a short text's time) and records only inside such a block, on its thread."""
    result = ValueNorms()
    layers = layer_access(model) if supports(model) else []
    result.supported = bool(layers)
    result.heads = layers[0].num_heads if layers else 1
    if not layers:
        yield result
        return
    projections = [acc.value for acc in layers]
    _install(model, projections)
    token = _RECORDING.set(_RECORDING.get() + (({id(p): i for i, p in enumerate(projections)}, result),))
    try:
        yield result
    finally:
        _RECORDING.reset(token)


def _install(model: torch.nn.Module, projections: list[torch.nn.Linear]) -> None:
    """`_record` on each value projection, once: a deep copy of the model (the corpus's int8 model) carries the very
    same function in its copied modules, which then record for the copy."""
    if model in _HOOKED:
        return
    with _INSTALL:
        if model in _HOOKED:
            return
        for projection in projections:
            if _record not in projection._forward_hooks.values():
                projection.register_forward_hook(_record)
        _HOOKED[model] = True


def _record(module: torch.nn.Module, _inputs: Any, output: torch.Tensor) -> None:
    for layers, result in _RECORDING.get():
        index = layers.get(id(module))
        if index is None:
            continue
        if index == 0:
            result.layers.clear()
        result.layers.append(output.detach() if output.requires_grad else output)
