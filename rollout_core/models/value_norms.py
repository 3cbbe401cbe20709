"""Value norms during the ordinary forward pass: a forward hook on each layer's value projection.

Supported: BERT-like encoders (`...attention.self.value`) and DINOv2 / ViT / DeiT (`...attention.attention.value`,
or transformers 5's `...attention.v_proj`). Other families give None: the attention-only sink criterion is used.
The locator is deliberately tiny (module names only); rollout_core/models/layer_access.py is the general one.
"""
from __future__ import annotations

import re
from contextlib import contextmanager
from typing import Iterator

import torch

_VALUE_NAME = re.compile(r"(?:^|\.)layer\.(\d+)\.attention\.(?:self\.value|attention\.value|v_proj)$")


def value_projections(model: torch.nn.Module) -> list[torch.nn.Linear] | None:
    """The value projection of every layer, in layer order, or None for an unsupported family."""
    found: dict[int, torch.nn.Module] = {}
    for name, module in model.named_modules():
        match = _VALUE_NAME.search(name)
        if match and isinstance(module, torch.nn.Linear):
            found[int(match.group(1))] = module
    if not found or sorted(found) != list(range(len(found))):
        return None
    return [found[i] for i in range(len(found))]


class ValueNorms:
    """Filled by `record_value_norms`: `.norms` is (L, B, n), mean over heads of ||v_j||, or None."""

    def __init__(self) -> None:
        self.layers: list[torch.Tensor] = []
        self.supported = False

    @property
    def norms(self) -> torch.Tensor | None:
        return torch.stack(self.layers) if self.supported and self.layers else None


@contextmanager
def record_value_norms(model: torch.nn.Module, num_heads: int) -> Iterator[ValueNorms]:
    """Within the block, every forward of `model` records per-token value norms (only the last forward is kept)."""
    result = ValueNorms()
    projections = value_projections(model)
    handles = []
    if projections is not None:
        result.supported = True

        def hook_for(index: int):
            def hook(_module, _inputs, output: torch.Tensor) -> None:
                if index == 0:
                    result.layers.clear()
                batch, n, hidden = output.shape
                heads = output.detach().float().view(batch, n, num_heads, hidden // num_heads)
                result.layers.append(heads.norm(dim=-1).mean(-1))
            return hook

        handles = [p.register_forward_hook(hook_for(i)) for i, p in enumerate(projections)]
    try:
        yield result
    finally:
        for handle in handles:
            handle.remove()
