"""Low-memory rollout: fuse heads and multiply the rollout inside the forward pass.

`output_attentions=True` keeps every layer's (heads, n, n) probabilities until the forward ends:
24 layers x 16 heads x 4096² fp32 is 25 GB. Here each layer's probabilities are computed in blocks
of query rows, fused over heads at once and folded into the running rollout R = Ã_l · R, so the
extra memory is a few (B, n, n) matrices (R, the fused layer, the product) plus the explained rows
after each layer, whatever the number of layers or heads.

Two paths, chosen per model family:
- Attention interface (every transformers 5 family whose attention calls
  `ALL_ATTENTION_FUNCTIONS.get_interface(...)`: BERT, RoBERTa, DistilBERT, ALBERT, ELECTRA, GPT-2,
  Llama, Mistral, Qwen2, Gemma, ViT, DeiT, BEiT, DINOv2, CLIP, T5 encoder, ...): an attention
  implementation "rollout_stream" is registered for the duration of the call and the model's config
  points at it. The layer output still comes from PyTorch's fused SDPA kernel (transformers' own
  `sdpa_attention_forward`); the probabilities are computed beside it, block by block. Families
  with logit soft-capping (Gemma 2), which SDPA cannot do, get their output from the same blocks.
- Forward hooks (families that compute attention inline: DeBERTa, MPNet, ...): see `paths`.

Row-only mode (long inputs, `spill`): the n x n rollout itself no longer fits (4 GiB at 32k tokens, n³ FLOPs
per layer). Each layer's Ã goes to disk by blocks of query rows as they are computed; after the forward the
explained rows of every layer are carried down from the top layer; no matrix is returned.

Layers are numbered in the order their attention runs, so a module shared across layers (ALBERT)
counts once per use. The per-layer step is `rollout_core.maths.rollout.augment_layer`, the same
one the plain path uses.

Modules: accumulator.py (the running rollout), attention.py (probabilities in blocks, the registered
attention function), paths.py (interface switch and hooks); this one is the public API.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import torch

from rollout_core import capture, settings
from rollout_core.errors import InputError, UnsupportedModelError
from rollout_core.lowmem.accumulator import ACTIVE, Accumulator
from rollout_core.lowmem.paths import STREAM_IMPLEMENTATION, attention_hooks, streaming_implementation
from rollout_core.lowmem.paths import uses_attention_interface
from rollout_core.maths.rollout import layer_range

__all__ = ["STREAM_IMPLEMENTATION", "Streamed", "estimate_full_capture_bytes",
           "estimate_streaming_bytes", "memory_budget_bytes", "streaming_rollout", "uses_attention_interface"]

"""Budget for the attentions the plain path keeps, when ROLLOUT_MEMORY_BUDGET_MB is not set."""


@dataclass
class Streamed:
    """One streaming forward pass over a batch: like `capture.Captured` (outputs, logits), with the rollout
    in place of the per-layer attentions. L' = end_layer - start_layer, r = the rows asked for."""

    outputs: Any
    logits: torch.Tensor | None
    matrix: torch.Tensor | None  # (B, n, n) R_end; None in row-only mode
    layer_rows: torch.Tensor  # (L', B, r, n) rows of R after each layer
    layer_attention_rows: torch.Tensor  # (L', B, r, n) rows of each layer's fused attention
    rows: list[int] | None  # the query positions of the row axis (None: all n)
    path: str  # "interface" | "hooks"
    sdpa_layers: int  # layers whose output came from SDPA
    spill: dict[str, Any] | None = None  # row-only mode: the layer files' dtype and size (None: full matrix)


def estimate_full_capture_bytes(
    num_layers: int, num_heads: int, n: int, batch: int = 1, dtype: torch.dtype = torch.float32
) -> int:
    """Bytes that `output_attentions=True` keeps alive: one (batch, heads, n, n) tensor per layer."""
    itemsize = dtype.itemsize
    return int(num_layers) * int(num_heads) * int(batch) * int(n) * int(n) * itemsize


def estimate_streaming_bytes(n: int, batch: int = 1) -> int:
    """Bytes the streaming path's full matrix needs at its peak: four float32 (B, n, n) matrices (R, the
    fused layer, the augmented layer, their product)."""
    return 4 * int(batch) * int(n) * int(n) * 4


def memory_budget_bytes() -> int:
    """Budget above which the explain pipeline switches to streaming: env ROLLOUT_MEMORY_BUDGET_MB (MiB)."""
    megabytes = settings.number("ROLLOUT_MEMORY_BUDGET_MB")
    return max(1, int(megabytes * 2**20))


def streaming_rollout(
    handle: Any,
    inputs: Mapping[str, torch.Tensor],
    *,
    head_fusion: str = "mean",
    residual_weight: float = 1.0,
    discard_ratio: float = 0.0,
    start_layer: int = 0,
    end_layer: int | None = None,
    rows: Sequence[int] | None = None,
    row_only: bool | None = None,
    spill_dtype: torch.dtype | None = None,
) -> Streamed:
    """Run the model once and return the rollout without keeping per-layer, per-head attentions.

    `handle` is anything with `.model` and `.device` (a ModelHandle). `inputs` are the model's
    keyword inputs (tokenizer or image-processor output); a 2-D "attention_mask" marks padding.
    `rows` are the query positions whose history the layer slider needs (None: all rows, which
    costs L' x n x n again; pass the explained rows).
    `row_only`: no matrix, the rows from layer files on disk (`spill`); None chooses it when the full matrix
    (`estimate_streaming_bytes`) would exceed the memory budget. `spill_dtype`: the files' dtype (None:
    float32 when they take at most half the free disk, else float16).
    A model's own failure raises UnsupportedModelError as `capture.run` does.
    """
    model: torch.nn.Module = handle.model
    device = torch.device(handle.device)
    config = getattr(model, "config", None)
    if getattr(config, "is_encoder_decoder", False):
        raise UnsupportedModelError(
            "Low-memory capture covers encoders, decoders and vision transformers; "
            "for encoder-decoder models use the standard capture (capture='full')."
        )
    batch = {k: (v.to(device) if isinstance(v, torch.Tensor) else v) for k, v in inputs.items()}
    padding = batch.get("attention_mask")
    padding = padding if isinstance(padding, torch.Tensor) and padding.dim() == 2 else None
    if row_only is None:
        ids = batch.get("input_ids")
        row_only = isinstance(ids, torch.Tensor) \
            and estimate_streaming_bytes(ids.shape[-1], ids.shape[0]) > memory_budget_bytes()
    if row_only and (rows is None or float(discard_ratio) > 0):
        raise InputError("the row-only low-memory capture (inputs too long for the full matrix) needs the explained "
                         "rows and discard_ratio 0 (discarding ranks a whole layer at once)")
    num_layers = getattr(handle, "num_layers", None) or getattr(config, "num_hidden_layers", None)
    if not num_layers:
        raise UnsupportedModelError("Low-memory capture needs the number of layers (config.num_hidden_layers).")
    accumulator = Accumulator(
        head_fusion=head_fusion,
        residual_weight=float(residual_weight),
        discard_ratio=float(discard_ratio),
        num_layers=int(num_layers),
        layers=layer_range(int(num_layers), start_layer, end_layer),
        rows=None if rows is None else [int(r) for r in rows],
        padding_mask=padding,
        row_only=bool(row_only),
        spill_dtype=spill_dtype,
    )
    path = "interface" if uses_attention_interface(model) else "hooks"
    runner = (functools.partial(streaming_implementation, compact_mask=bool(row_only)) if path == "interface"
              else attention_hooks)
    token = ACTIVE.set(accumulator)
    try:
        with torch.no_grad(), runner(model):
            outputs = capture.forward(model, batch, output_attentions=path == "hooks")
        accumulator.check()
        accumulator.finish()
    finally:
        ACTIVE.reset(token)
        accumulator.close()
    spill = accumulator.spill
    return Streamed(
        outputs=outputs, logits=getattr(outputs, "logits", None), matrix=accumulator.rollout,
        layer_rows=torch.stack(accumulator.layer_rows),
        layer_attention_rows=torch.stack(accumulator.layer_attention_rows),
        rows=accumulator.rows, path=path, sdpa_layers=accumulator.sdpa_layers,
        spill=None if spill is None else {"dtype": str(spill.dtype).removeprefix("torch."), "bytes": spill.nbytes},
    )
