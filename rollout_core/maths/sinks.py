"""Attention sinks: tokens that receive far more attention than uniform but pass little information.

A sink in layer l of sample b is a real token j whose received attention (column mean over the real
query rows of the head-fused attention, so uniform attention gives 1/n_real) is at least `ratio`
times uniform; when value norms are known (mean over heads of ||v_j||), it must also have a value
norm below `value_factor` x that layer's median. The defaults (ratio 5, value_factor 0.5) separate
the sinks of the default models from the rest: DINOv2-small layer 1's sink patch receives ~30-45x
uniform on shapes and photos while the next patch is below 3x; BERT's [SEP] and '.' receive 4-12x
uniform in the middle layers; sink value norms there are below half the median.

`sink_free_rollout` drops sink columns layer by layer: their incoming attention is removed and each
row renormalised over the remaining real tokens (the sink keeps its own residual, so every Ã stays
row-stochastic), then the rollout is the usual product.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import torch

from rollout_core.errors import InputError
from rollout_core.maths.rollout import Attentions, as_layers, attention_rollout, fused_copy
from rollout_core.maths.rollout import padding_only, real_token_mask

DEFAULT_RATIO = 5.0
DEFAULT_VALUE_FACTOR = 0.6


@dataclass
class SinkReport:
    """Per layer and sample: `sinks` (L, B, n) bool; `share` (L, B) share of the layer's attention taken
    by its sinks; `received` (L, B, n) attention received over uniform (1.0 = uniform)."""

    sinks: torch.Tensor
    share: torch.Tensor
    received: torch.Tensor


def received_attention(attentions: Attentions, attention_mask: torch.Tensor | None = None, *,
                       head_fusion: str = "mean") -> tuple[torch.Tensor, torch.Tensor]:
    """(received over uniform (L, B, n), share of all attention per column (L, B, n)) from the head-fused
    attention of real query rows; padded positions get 0."""
    fused = fused_copy(attentions, head_fusion).clamp_min_(0)
    dtype = fused.dtype
    _, batch, n, _ = fused.shape
    real = None if attention_mask is None else real_token_mask(attention_mask, batch, n, fused.device, dtype)
    if real is not None and padding_only(real) is not None:
        fused.mul_(real[None, :, :, None]).mul_(real[None, :, None, :])
    column = fused.sum(-2)
    share = column / column.sum(-1, keepdim=True).clamp_min(torch.finfo(dtype).tiny)
    return (share * n if real is None else share * real.sum(-1)[None, :, None]), share  # n real tokens each


def find_sinks(
    attentions: Attentions,
    value_norms: torch.Tensor | None = None,
    attention_mask: torch.Tensor | None = None,
    *,
    ratio: float = DEFAULT_RATIO,
    value_factor: float = DEFAULT_VALUE_FACTOR,
    head_fusion: str = "mean",
    exclude: Sequence[int] = (),
) -> SinkReport:
    """Sinks of every layer and sample (see the module docstring for the criterion and its thresholds).

    `value_norms` (L, B, n) optional: without it the attention-only criterion is used. `exclude`: positions
    that are never sinks (e.g. the explained [CLS] row, which would otherwise be cut off from itself).
    """
    if not ratio > 1.0 or not value_factor > 0.0:
        raise InputError(f"ratio must be > 1 and value_factor > 0, got {ratio}, {value_factor}")
    over, share = received_attention(attentions, attention_mask, head_fusion=head_fusion)
    sinks = over >= ratio
    if exclude:
        n = over.shape[-1]
        bad = [p for p in exclude if not -n <= int(p) < n]
        if bad:
            raise InputError(f"exclude positions {bad} are outside the {n} positions")
        sinks[..., [int(p) % n for p in exclude]] = False
    if value_norms is not None:
        if tuple(value_norms.shape) != tuple(over.shape):
            raise InputError(f"value_norms must be (layers, batch, n) = {tuple(over.shape)}, "
                             f"got {tuple(value_norms.shape)}")
        norms = value_norms if (value_norms.device, value_norms.dtype) == (over.device, over.dtype) else \
            value_norms.to(device=over.device, dtype=over.dtype)
        masked = norms  # padded positions out of the median
        if attention_mask is not None:
            real = real_token_mask(attention_mask, over.shape[1], over.shape[2], over.device, torch.bool).bool()
            masked = norms.masked_fill(~real[None], float("nan"))
        median = masked.nanmedian(dim=-1, keepdim=True).values
        sinks &= norms < value_factor * median
    return SinkReport(sinks=sinks, share=(share * sinks).sum(-1), received=over)


def sink_free_rollout(
    attentions: Attentions,
    sinks: torch.Tensor | SinkReport,
    *,
    head_fusion: str = "mean",
    residual_weight: float = 1.0,
    discard_ratio: float = 0.0,
    start_layer: int = 0,
    end_layer: int | None = None,
    attention_mask: torch.Tensor | None = None,
    all_layers: bool = False,
) -> torch.Tensor:
    """attention_rollout with each layer's sink columns dropped (sinks (L, B, n) bool or a SinkReport):
    fused attention to a sink is zeroed, then residual + row renormalisation over the remaining real
    tokens as in augment_layer. Same options and shapes as rollout_core.maths.rollout.attention_rollout."""
    layers = as_layers(attentions)
    mask = sinks.sinks if isinstance(sinks, SinkReport) else sinks
    batch, _, n, _ = layers[0].shape
    if tuple(mask.shape) != (len(layers), batch, n):
        raise InputError(f"sinks must be (layers, batch, n) = {(len(layers), batch, n)}, got {tuple(mask.shape)}")
    return attention_rollout(layers, head_fusion=head_fusion, residual_weight=residual_weight,
                             discard_ratio=discard_ratio, start_layer=start_layer, end_layer=end_layer,
                             attention_mask=attention_mask, all_layers=all_layers, drop_columns=mask)


def describe_sinks(report: SinkReport, tokens: list[str] | None = None, *, sample: int = 0) -> str:
    """One plain sentence on the layer whose sinks take the largest share, e.g.
    "3 sink tokens ('[SEP]', '.', ...) took 41% of layer 1's attention." (layers counted from 1)."""
    counts = report.sinks[:, sample].sum(-1)
    if int(counts.sum()) == 0:
        return "No attention sinks were found."
    layer = int(report.share[:, sample].argmax())
    positions = report.sinks[layer, sample].nonzero().flatten().tolist()
    names = ""
    if tokens is not None:
        shown = ", ".join(repr(tokens[p]) for p in positions[:3]) + (", ..." if len(positions) > 3 else "")
        names = f" ({shown})"
    count = len(positions)
    noun = "sink token" if count == 1 else "sink tokens"
    share = float(report.share[layer, sample]) * 100
    return f"{count} {noun}{names} took {share:.0f}% of layer {layer + 1}'s attention."


def sink_facts(report: SinkReport, sample: int, n: int) -> dict[str, list]:
    """Sample `sample`'s sinks as plain lists (an Explanation's extras): `positions` per layer (below n), and
    `share`, the share of each layer's attention they took."""
    sinks = report.sinks[:, sample, :n].tolist()  # one conversion, not torch ops per layer (corpus rows)
    return {"positions": [[p for p, sink in enumerate(layer) if sink] for layer in sinks],
            "share": [float(s) for s in report.share[:, sample].tolist()]}


def describe_sink_facts(facts: dict[str, list], tokens: list[str] | None = None) -> str:
    """describe_sinks on what sink_facts kept (e.g. from a saved explanation)."""
    n = 1 + max((p for layer in facts["positions"] for p in layer), default=0)
    n = max(n, len(tokens or ()))
    sinks = torch.zeros(len(facts["positions"]), 1, n, dtype=torch.bool)
    for layer, positions in enumerate(facts["positions"]):
        sinks[layer, 0, positions] = True
    share = torch.tensor(facts["share"], dtype=torch.float64)[:, None]
    return describe_sinks(SinkReport(sinks=sinks, share=share, received=torch.zeros(sinks.shape)), tokens)
