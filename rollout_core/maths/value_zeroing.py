"""Value zeroing (Mohebbi et al., EACL 2023; reference hmohebbi/ValueZeroing, scoring/value_zeroing.py).

For layer l and token j, token j's value vectors are set to zero in every head of layer l and the whole
block (attention, residual, norm, feed-forward) is recomputed from the layer's observed input. C_l[i, j]
is the cosine distance between the original and the recomputed output of token i; rows are normalised
over the real tokens. The n zeroings of a layer are run as batched copies of the layer input, `chunk`
tokens at a time, so the cost is about n / chunk extra layer calls per layer and no extra full pass.
"""
from __future__ import annotations

from contextlib import contextmanager
from typing import Iterator, Sequence

import torch

from rollout_core.cancel import checkpoint
from rollout_core.errors import UnsupportedModelError
from rollout_core.models.layer_access import layer_access
from rollout_core.models.thread_hooks import own_thread


def encoder_layers_and_values(model: torch.nn.Module, purpose: str = "Value zeroing"
                              ) -> list[tuple[torch.nn.Module, torch.nn.Linear]]:
    """(layer block, value projection) of every encoder layer, first layer first (from
    rollout_core.models.layer_access; UnsupportedModelError naming the supported families otherwise)."""
    return [(acc.layer, acc.value) for acc in layer_access(model, purpose)]


def additive_mask(attention_mask: torch.Tensor | None, dtype: torch.dtype) -> torch.Tensor | None:
    """(B, n) 1/0 mask -> (B, 1, 1, n) additive mask (0 for real keys, dtype min for padding)."""
    if attention_mask is None:
        return None
    keep = attention_mask[:, None, None, :].to(torch.bool)
    return torch.zeros(keep.shape, dtype=dtype, device=keep.device).masked_fill(~keep, torch.finfo(dtype).min)


def run_block(block: torch.nn.Module, x: torch.Tensor, mask4: torch.Tensor | None) -> torch.Tensor:
    """One layer block on hidden states x (B, n, d) -> (B, n, d), whatever the family returns."""
    out = block(x, attention_mask=mask4) if mask4 is not None else block(x)
    return out[0] if isinstance(out, (tuple, list)) else out


@contextmanager
def _zero_value_rows(value: torch.nn.Linear, rows: torch.Tensor) -> Iterator[None]:
    """While active, copy c of the batch has its value vector at position rows[c] zeroed (all heads)."""
    def hook(_module, _args, output):
        keep = torch.ones(output.shape[:2], dtype=output.dtype, device=output.device)
        keep[torch.arange(len(rows), device=output.device), rows] = 0
        return output * keep[..., None]
    handle = value.register_forward_hook(own_thread(hook))
    try:
        yield
    finally:
        handle.remove()


@torch.no_grad()
def value_zeroing_contributions(model: torch.nn.Module, hidden_states: Sequence[torch.Tensor],
                                attention_mask: torch.Tensor | None = None, *, chunk: int = 64) -> torch.Tensor:
    """Value-zeroing contribution matrices C (L, B, n, n), rows = outputs i, columns = zeroed inputs j.

    hidden_states: the ordinary forward's output_hidden_states (L + 1 tensors (B, n, d); entry l is layer
    l's input). attention_mask: (B, n) 1/0 or None. Rows sum to 1 over real tokens; padding rows and
    columns are exactly 0. `chunk` bounds memory: at most `chunk` copies of one sequence per layer call.
    Float64 whatever the model's dtype: early layers' distances (1e-7..1e-5) are below what `1 - cos` resolves
    in float32, so the cosine is taken in float64 from the model's own outputs.
    """
    layers = encoder_layers_and_values(model)
    if len(hidden_states) != len(layers) + 1:
        raise UnsupportedModelError(
            f"Expected {len(layers) + 1} hidden states (embeddings + every layer), got {len(hidden_states)}.")
    x0 = hidden_states[0]
    batch, n, _ = x0.shape
    device = hidden_states[0].device
    real = (torch.ones(batch, n, device=device) if attention_mask is None else attention_mask.to(device).float())
    mask4 = additive_mask(real, hidden_states[0].dtype)
    out = torch.zeros(len(layers), batch, n, n, dtype=torch.float64, device=device)
    for l, (block, value) in enumerate(layers):
        x = hidden_states[l]
        original = run_block(block, x, mask4)
        for b in range(batch):
            for start in range(0, n, chunk):
                checkpoint()  # a stopped page session stops its re-runs here (rollout_core.cancel)
                rows = torch.arange(start, min(start + chunk, n), device=device)
                xs = x[b:b + 1].expand(len(rows), -1, -1)
                m = None if mask4 is None else mask4[b:b + 1].expand(len(rows), -1, -1, -1)
                with _zero_value_rows(value, rows):
                    zeroed = run_block(block, xs, m)
                ref = original[b:b + 1].double()
                dist = 1 - torch.nn.functional.cosine_similarity(zeroed.double(), ref, dim=-1)
                out[l, b, :, rows] = dist.T
    out = out * real[None, :, :, None] * real[None, :, None, :]
    total = out.sum(-1, keepdim=True)
    return torch.where(total > 0, out / total.clamp_min(torch.finfo(out.dtype).tiny), out)
