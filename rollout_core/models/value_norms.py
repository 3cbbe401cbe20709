"""Value norms during the ordinary forward pass: a forward hook on each layer's value projection.

The projections come from rollout_core.models.layer_access (BERT-like and ViT-like encoders); other families
give None: the attention-only sink criterion is used.
"""
from __future__ import annotations

from contextlib import contextmanager
from typing import Iterator

import torch

from rollout_core.models.layer_access import layer_access, supports
from rollout_core.models.thread_hooks import own_thread


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
        values = torch.stack(self.layers).float()
        layers, batch, n, hidden = values.shape
        per_head = values.view(layers, batch, n, self.heads, hidden // self.heads)
        return torch.linalg.vector_norm(per_head, dim=-1).mean(-1)


@contextmanager
def record_value_norms(model: torch.nn.Module) -> Iterator[ValueNorms]:
    """Within the block, every forward of `model` on this thread records per-token value norms (only the last
    forward is kept)."""
    result = ValueNorms()
    layers = layer_access(model) if supports(model) else []
    result.supported = bool(layers)
    result.heads = layers[0].num_heads if layers else 1

    def hook_for(index: int):
        def hook(_module, _inputs, output: torch.Tensor) -> None:
            if index == 0:
                result.layers.clear()
            result.layers.append(output.detach())
        return hook

    handles = [acc.value.register_forward_hook(own_thread(hook_for(i))) for i, acc in enumerate(layers)]
    try:
        yield result
    finally:
        for handle in handles:
            handle.remove()
