"""Value zeroing (Mohebbi et al., EACL 2023; reference hmohebbi/ValueZeroing, scoring/value_zeroing.py).

For layer l and token j, token j's value vectors are set to zero in every head of layer l and the whole
block (attention, residual, norm, feed-forward) is recomputed from the layer's observed input. C_l[i, j]
is the cosine distance between the original and the recomputed output of token i; rows are normalised
over the real tokens.

Most distances are 1e-9..1e-4: changes below the rounding of a float32 block's outputs. So each layer is re-run
as a float64 copy of its block (the model's own code), `chunk` zeroed copies of one sequence at a time with the
original as the last copy, and two exact shortcuts keep its cost near a float32 re-run of the whole block (below
it from a few dozen tokens on, above it on short texts: a float64 copy per layer; benchmarks/RESULTS.md):
- attention is not recomputed: zeroing v_j leaves the attention weights alone and takes alpha^h_ij v^h_j
  (times W_O^h when the attention module ends with its output projection) from every output i, so a copy's
  attention output is the original's minus that change;
- each linear layer after attention multiplies the copies' *difference* from the original with the model's
  own (float32) weights, W x + b + W (x_c - x), as exact relative to the small difference as a float64
  product. Layers as wide as the residual stream return float64; the wider feed-forward intermediate stays in
  the model's dtype, where the copies and the original share one rounding.
"""
from __future__ import annotations

import copy
from contextlib import ExitStack, contextmanager
from typing import Any, Callable, Iterator, Sequence

import torch
from torch import nn

from rollout_core.cancel import checkpoint
from rollout_core.errors import UnsupportedModelError
from rollout_core.models.layer_access import LayerAccess, layer_access

WIDE = torch.float64
_HOOK_TABLES = ("_forward_hooks", "_forward_pre_hooks", "_forward_hooks_with_kwargs",
                "_forward_pre_hooks_with_kwargs", "_forward_hooks_always_called", "_backward_hooks",
                "_backward_pre_hooks")


def additive_mask(attention_mask: torch.Tensor | None, dtype: torch.dtype) -> torch.Tensor | None:
    """(B, n) 1/0 mask -> (B, 1, 1, n) additive mask (0 for real keys, dtype min for padding)."""
    if attention_mask is None:
        return None
    keep = attention_mask[:, None, None, :].to(torch.bool)
    return torch.zeros(keep.shape, dtype=dtype, device=keep.device).masked_fill(~keep, torch.finfo(dtype).min)


def run_block(block: nn.Module, x: torch.Tensor, mask4: torch.Tensor | None) -> torch.Tensor:
    """One layer block on hidden states x (B, n, d) -> (B, n, d), whatever the family returns."""
    out = block(x, attention_mask=mask4) if mask4 is not None else block(x)
    return out[0] if isinstance(out, (tuple, list)) else out


def _private_copy(block: nn.Module) -> nn.Module:
    """A float64 deep copy of `block` without the hooks other sessions may have put on the shared one (their
    tables are not read: another thread may be changing them). Parameters are copied once, straight to float64."""
    memo: dict[int, Any] = {id(p): nn.Parameter(p.detach().to(WIDE), requires_grad=False) for p in block.parameters()}
    for module in block.modules():
        for name in _HOOK_TABLES:
            table = module.__dict__.get(name)
            if table is not None:
                memo[id(table)] = type(table)()
    return copy.deepcopy(block, memo).to(WIDE)


@contextmanager
def _answering(module: nn.Module, forward: Callable[..., Any]) -> Iterator[None]:
    """`module` (of a private copy) answers with `forward` while active."""
    module.forward = forward
    try:
        yield
    finally:
        del module.forward


def _difference_form(wide: nn.Linear, own: nn.Linear, hidden: int) -> Callable[[torch.Tensor], torch.Tensor]:
    """The forward of `wide` (float64 copy of the model's `own`) on copies x (C + 1, ..., k), the original last:
    the original's product in float64, the copies' differences from it in `own`'s dtype. The output is float64
    when it is `hidden` wide (the residual stream), else in `own`'s dtype."""
    narrow = own.weight.dtype if wide.out_features != hidden else WIDE

    def forward(x: torch.Tensor) -> torch.Tensor:
        base = nn.functional.linear(x[-1:].to(WIDE), wide.weight, wide.bias).to(narrow)
        out = nn.functional.linear((x - x[-1:]).to(own.weight.dtype), own.weight).to(narrow)
        return out.add_(base)
    return forward


class _WideLayer:
    """One layer's float64 copy, run on the original sequence (`original`) or on zeroed copies of it
    (`zeroed`)."""

    def __init__(self, acc: LayerAccess):
        self.block = _private_copy(acc.layer)
        names = {m: name for name, m in acc.layer.named_modules()}
        self.attention = self.block.get_submodule(names[acc.attention])
        self.value = self.block.get_submodule(names[acc.value])
        inside = set(acc.attention.modules())
        self.w_o = acc.output.weight if acc.output in inside else None  # applied inside the attention module
        self.heads = acc.num_heads
        hidden = acc.output.out_features
        self.after = [(self.block.get_submodule(name), _difference_form(self.block.get_submodule(name), m, hidden))
                      for name, m in acc.layer.named_modules() if isinstance(m, nn.Linear) and m not in inside]

    def original(self, x: torch.Tensor, mask4: torch.Tensor | None) -> tuple[tuple[torch.Tensor, ...], torch.Tensor]:
        """The plain float64 layer on x (1, n, d): what its attention module returned (output, weights, ...)
        and the value vectors (n, H, dh)."""
        seen: dict[str, Any] = {}
        hooks = [self.attention.register_forward_hook(lambda m, a, out: seen.setdefault("attention", out)),
                 self.value.register_forward_hook(lambda m, a, out: seen.setdefault("values", out))]
        try:
            run_block(self.block, x, mask4)
        finally:
            for h in hooks:
                h.remove()
        return seen["attention"], seen["values"][0].unflatten(-1, (self.heads, -1))

    def zeroed(self, x: torch.Tensor, attention: tuple[torch.Tensor, ...], values: torch.Tensor,
               rows: torch.Tensor) -> torch.Tensor:
        """Block outputs (len(rows) + 1, n, d): copy c with v_{rows[c]} zeroed, the original last."""
        probs = attention[1][0][:, :, rows]  # (H, n, C): alpha^h_ij for every output i and zeroed j
        v = values[rows]  # (C, H, dh)
        if self.w_o is None:  # the module returns the heads' contexts side by side
            change = torch.einsum("hic,che->cihe", probs, v).flatten(-2)
        else:
            w_o = self.w_o.to(WIDE).unflatten(1, (self.heads, -1))  # (d, H, dh)
            change = torch.einsum("hic,chd->cid", probs, torch.einsum("che,dhe->chd", v, w_o))
        output = attention[0]
        copies = torch.cat([output - change, output])
        with ExitStack() as stack:
            stack.enter_context(_answering(self.attention, lambda *a, **k: (copies, *attention[1:])))
            for module, forward in self.after:
                stack.enter_context(_answering(module, forward))
            # x (1, n, d) broadcasts against the copies where the block adds its residual; the input norm of a
            # pre-LN block runs once, and the mask is only read by the attention module, which answers itself
            return run_block(self.block, x, None)


@torch.no_grad()
def value_zeroing_contributions(model: nn.Module, hidden_states: Sequence[torch.Tensor],
                                attention_mask: torch.Tensor | None = None, *, chunk: int = 64) -> torch.Tensor:
    """Value-zeroing contribution matrices C (L, B, n, n) in float64, rows = outputs i, columns = zeroed inputs j.

    hidden_states: the ordinary forward's output_hidden_states (L + 1 tensors (B, n, d); entry l is layer
    l's input). attention_mask: (B, n) 1/0 or None. Rows sum to 1 over real tokens; padding rows and
    columns are exactly 0. `chunk` bounds memory: at most `chunk` zeroed copies of one sequence per layer call.
    """
    layers = layer_access(model, "Value zeroing")
    if len(hidden_states) != len(layers) + 1:
        raise UnsupportedModelError(
            f"Expected {len(layers) + 1} hidden states (embeddings + every layer), got {len(hidden_states)}.")
    batch, n, _ = hidden_states[0].shape
    device = hidden_states[0].device
    real = (torch.ones(batch, n, dtype=WIDE, device=device) if attention_mask is None
            else attention_mask.to(device=device, dtype=WIDE))
    mask4 = additive_mask(real, WIDE)
    out = torch.zeros(len(layers), batch, n, n, dtype=WIDE, device=device)
    for l, acc in enumerate(layers):
        layer = _WideLayer(acc)
        for b in range(batch):
            x = hidden_states[l][b:b + 1].to(WIDE)
            attention, values = layer.original(x, None if mask4 is None else mask4[b:b + 1])
            for start in range(0, n, chunk):
                checkpoint()  # a stopped page session stops its re-runs here (rollout_core.cancel)
                rows = torch.arange(start, min(start + chunk, n), device=device)
                outputs = layer.zeroed(x, attention, values, rows)
                out[l, b, :, rows] = (1 - nn.functional.cosine_similarity(outputs[:-1], outputs[-1:], dim=-1)).T
    out = out * real[None, :, :, None] * real[None, :, None, :]
    total = out.sum(-1, keepdim=True)
    return torch.where(total > 0, out / total.clamp_min(torch.finfo(out.dtype).tiny), out)
