"""Attention probabilities in blocks of query rows, and the attention function registered while a
streaming capture runs: the layer output from SDPA, the head-fused probabilities into the accumulator."""
from __future__ import annotations

from typing import Any

import torch

from rollout_core.errors import UnsupportedModelError
from rollout_core.lowmem.accumulator import ACTIVE
from rollout_core.maths.fusion import fuse_heads

_UNSUPPORTED_KWARGS = ("s_aux", "sinks")  # attention sinks change the softmax; not reproduced here


BLOCK_ENTRIES = 2**24
"""At most this many scores in one block (64 MiB in float32): at 32k tokens a quarter of n x n is 1 GiB."""


def query_block(batch: int, heads: int, n: int) -> int:
    """Query rows per block so that one block of scores is about a quarter of an (n, n) matrix, and at most
    BLOCK_ENTRIES scores."""
    return max(1, min(n, n // max(1, 4 * batch * heads), BLOCK_ENTRIES // max(1, batch * heads * n)))


def block_probabilities(
    query: torch.Tensor,
    key: torch.Tensor,
    attention_mask: torch.Tensor | None,
    start: int,
    stop: int,
    *,
    scaling: float | None,
    softcap: float | None,
    position_bias: torch.Tensor | None,
    is_causal: bool,
) -> torch.Tensor:
    """Softmax probabilities (B, H, stop-start, k) of query rows start:stop, in float32 or wider.

    Mirrors transformers' eager attention: scale, soft-cap, add position bias and mask (additive
    float or boolean keep-mask), causal mask when no mask is given, softmax over keys. Grouped
    query attention is done without repeating keys: query heads are grouped under their KV head.
    """
    compute = torch.promote_types(query.dtype, torch.float32)
    batch, heads, _, dim = query.shape
    kv_heads = key.shape[1]
    scale = dim**-0.5 if scaling is None else scaling
    q = query[:, :, start:stop].to(compute)
    k = key.to(compute)
    group = heads // kv_heads
    scores = torch.matmul(q.reshape(batch, kv_heads, group, stop - start, dim), k.unsqueeze(2).transpose(-1, -2))
    scores = scores.reshape(batch, heads, stop - start, key.shape[2]).mul_(scale)  # in place: one block alive
    if softcap is not None:
        scores = scores.div_(softcap).tanh_().mul_(softcap)
    if position_bias is not None:
        scores = scores.add_(_query_rows(position_bias, start, stop).to(compute))
    floor = torch.finfo(compute).min
    if attention_mask is not None:
        block = _query_rows(attention_mask, start, stop)
        scores = scores.masked_fill_(~block, floor) if block.dtype == torch.bool else scores.add_(block.to(compute))
    elif is_causal and query.shape[2] > 1:
        rows = torch.arange(start, stop, device=query.device)[:, None]
        future = torch.arange(key.shape[2], device=query.device)[None, :] > rows
        scores = scores.masked_fill_(future, floor)
    return torch.softmax(scores, dim=-1)


def _query_rows(bias: torch.Tensor, start: int, stop: int) -> torch.Tensor:
    """Rows start:stop of a (B, H, q, k) bias or mask; a broadcast query axis (size 1) is kept whole."""
    return bias if bias.shape[-2] == 1 else bias[..., start:stop, :]


def stream_attention(
    module: torch.nn.Module,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attention_mask: torch.Tensor | None,
    dropout: float = 0.0,
    scaling: float | None = None,
    softcap: float | None = None,
    **kwargs: Any,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """The registered attention function: SDPA output, plus fused probabilities for the rollout.

    Called outside a capture (another thread using the same model object while a capture switched
    its config), it behaves like eager attention and returns the per-head weights.
    """
    for name in _UNSUPPORTED_KWARGS:
        if kwargs.get(name) is not None:
            raise UnsupportedModelError("Low-memory capture does not support attention sinks; use capture='full'.")
    accumulator = ACTIVE.get()
    position_bias = kwargs.get("position_bias")
    is_causal = kwargs.get("is_causal")
    is_causal = bool(getattr(module, "is_causal", False) if is_causal is None else is_causal)
    options = dict(scaling=scaling, softcap=softcap, position_bias=position_bias, is_causal=is_causal)
    batch, heads, q_len, _ = query.shape
    k_len = key.shape[2]

    if accumulator is None:
        weights = block_probabilities(query, key, attention_mask, 0, q_len, **options)
        weights = torch.nn.functional.dropout(weights.to(query.dtype), p=dropout, training=module.training)
        return torch.matmul(weights, _repeat_heads(value, heads)).transpose(1, 2).contiguous(), weights

    if q_len != k_len:
        raise UnsupportedModelError(
            "Low-memory capture needs self-attention over the whole input (no cross-attention, no cache); "
            "use capture='full' for this model."
        )
    layer = accumulator.next_layer()
    use_sdpa = softcap is None
    output = values = None
    if not use_sdpa:  # the output comes from the probability blocks
        output = torch.empty(batch, heads, q_len, value.shape[-1], dtype=value.dtype, device=value.device)
        values = _repeat_heads(value, heads)
    fused = None
    if accumulator.wants(layer) or not use_sdpa:
        step = query_block(batch, heads, q_len)
        for start in range(0, q_len, step):
            stop = min(q_len, start + step)
            probs = block_probabilities(query, key, attention_mask, start, stop, **options)
            if accumulator.wants(layer):
                block = fuse_heads(probs, how=accumulator.head_fusion)
                if accumulator.row_only:
                    accumulator.add_rows(block, start)
                elif fused is None:
                    fused = accumulator.fused_buffer(batch, q_len, block.dtype, block.device)
                if fused is not None:
                    fused[:, start:stop] = block
            if output is not None:
                output[:, :, start:stop] = torch.matmul(probs.to(value.dtype), values)
            del probs
    if fused is not None:
        accumulator.add(fused)
        del fused
    elif accumulator.row_only and accumulator.wants(layer):
        accumulator.end_layer()
    if use_sdpa:
        from transformers.integrations.sdpa_attention import sdpa_attention_forward

        accumulator.sdpa_layers += 1
        attn_output, _ = sdpa_attention_forward(
            module, query, key, value, attention_mask, dropout=dropout, scaling=scaling, **kwargs
        )
        return attn_output, None
    return output.transpose(1, 2).contiguous(), None


def _repeat_heads(states: torch.Tensor, heads: int) -> torch.Tensor:
    """(B, KV, n, d) -> (B, heads, n, d), query head h reading KV head h // (heads / KV)."""
    group = heads // states.shape[1]
    return states if group == 1 else states.repeat_interleave(group, dim=1)
