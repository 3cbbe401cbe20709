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
        self.layers: list[torch.Tensor] = []
        self.supported = False

    @property
    def norms(self) -> torch.Tensor | None:
        return torch.stack(self.layers) if self.supported and self.layers else None


@contextmanager
def record_value_norms(model: torch.nn.Module) -> Iterator[ValueNorms]:
    """Within the block, every forward of `model` on this thread records per-token value norms (only the last
    forward is kept)."""
    result = ValueNorms()
    layers = layer_access(model) if supports(model) else []
    result.supported = bool(layers)

    def hook_for(index: int, num_heads: int):
        def hook(_module, _inputs, output: torch.Tensor) -> None:
            if index == 0:
                result.layers.clear()
            batch, n, hidden = output.shape
            heads = output.detach().float().view(batch, n, num_heads, hidden // num_heads)
            result.layers.append(heads.norm(dim=-1).mean(-1))
        return hook

    handles = [acc.value.register_forward_hook(own_thread(hook_for(i, acc.num_heads))) for i, acc in enumerate(layers)]
    try:
        yield result
    finally:
        for handle in handles:
            handle.remove()
