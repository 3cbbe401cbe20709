"""Attention rollout (Abnar & Zuidema 2020), batched and device-agnostic.

Convention: token states mix as h_l = Ã_l · h_(l-1), so the rollout through layers start..end-1 is
R = Ã_(end-1) · ... · Ã_start (later layers on the LEFT) and R[b, i, j] is the share of input token j
in output token i. Every Ã is row-stochastic on the real tokens; padded positions are exactly 0.
"""
from __future__ import annotations

import operator
from typing import Sequence

import torch

from rollout_core.errors import InputError
from rollout_core.maths.fusion import fuse_heads
from rollout_core.options import HEAD_FUSIONS
from rollout_core.maths.row_step import clean_rows, residual_normalise_

Attentions = Sequence[torch.Tensor] | torch.Tensor
SORT_CHUNK_ENTRIES = 2**24  # entries ranked at once when discarding (bounds the int64 sort buffers)


def compute_dtype(dtype: torch.dtype) -> torch.dtype:
    """Accumulate in float64 for float64 inputs, float32 for everything else (fp16/bf16 included)."""
    return torch.float64 if dtype == torch.float64 else torch.float32


def as_layers(attentions: Attentions) -> list[torch.Tensor]:
    """Validate attentions and return them as a list of L (B, H, n, n) tensors, without copying."""
    if isinstance(attentions, torch.Tensor):
        if attentions.dim() != 5:
            raise InputError("attentions tensor must be (layers, batch, heads, n, n), got shape "
                             f"{tuple(attentions.shape)}")
        layers = list(attentions.unbind(0))
    else:
        layers = list(attentions)
    if not layers:
        raise InputError("no attention layers were given")
    if any(a is None for a in layers):
        raise InputError("some layers returned no attention weights (load the model with eager attention)")
    shapes = {tuple(a.shape) for a in layers}
    if len(shapes) != 1:
        raise InputError(f"attention layers have different shapes: {sorted(shapes)}")
    shape = layers[0].shape
    if len(shape) != 4 or shape[-1] != shape[-2]:
        raise InputError(f"each attention layer must be (batch, heads, n, n) with n x n square, got {tuple(shape)}")
    return layers


def fused_stack(layers: Sequence[torch.Tensor], head_fusion: str, dtype: torch.dtype) -> torch.Tensor:
    """Every layer's heads fused in `dtype`, stacked: (L, B, n, n), a tensor of its own (the steps after it run
    in place)."""
    return torch.stack([fuse_heads(a if a.dtype == dtype else a.to(dtype), head_fusion) for a in layers])


def fused_copy(attentions: Attentions, head_fusion: str) -> torch.Tensor:
    """`fused_stack` of `attentions` (checked as `as_layers` checks them) in the compute dtype. A (L, B, 1, n, n)
    tensor (heads fused in the forward pass and stacked, `capture.Captured.stacked`) is copied in one call (fusing
    one head is the identity), not taken apart layer by layer."""
    if (isinstance(attentions, torch.Tensor) and attentions.dim() == 5 and attentions.shape[0] > 0
            and attentions.shape[2] == 1 and attentions.shape[-1] == attentions.shape[-2]
            and head_fusion in HEAD_FUSIONS):
        return attentions.squeeze(2).to(dtype=compute_dtype(attentions.dtype), copy=True)
    layers = as_layers(attentions)
    return fused_stack(layers, head_fusion, compute_dtype(layers[0].dtype))


def layer_range(num_layers: int, start_layer: int, end_layer: int | None) -> range:
    """Python slice semantics over layers (negative indices allowed); an empty range is an error.
    Integer-like values (numpy integers from a table or slider) are accepted; floats are not."""
    try:
        start = operator.index(start_layer)
        end = None if end_layer is None else operator.index(end_layer)
    except TypeError:
        raise InputError(f"start_layer and end_layer must be integers, got {start_layer!r}, {end_layer!r}") from None
    selected = range(num_layers)[start:end]
    if len(selected) == 0:
        raise InputError(
            f"layer range start_layer={start_layer}, end_layer={end_layer} selects no layer of {num_layers}"
        )
    return selected


def real_token_mask(attention_mask: torch.Tensor | None, batch: int, n: int, device: torch.device,
                    dtype: torch.dtype) -> torch.Tensor:
    """(B, n) float mask of real tokens (all ones when no mask is given)."""
    if attention_mask is None:
        return torch.ones(batch, n, device=device, dtype=dtype)
    if tuple(attention_mask.shape) != (batch, n):
        raise InputError(f"attention_mask must be (batch, n) = {(batch, n)}, got {tuple(attention_mask.shape)}")
    return (attention_mask.to(device) > 0).to(dtype)


def padding_only(real: torch.Tensor | None) -> torch.Tensor | None:
    """`real` (a real-token mask), or None when every token is real: multiplying by a mask of ones changes
    nothing, so the masked steps are skipped for unpadded inputs."""
    return None if real is None or bool(real.all()) else real


def _check_options(residual_weight: float, discard_ratio: float) -> None:
    try:
        residual, discard = float(residual_weight), float(discard_ratio)
    except (TypeError, ValueError):
        raise InputError(f"residual_weight and discard_ratio must be numbers, got {residual_weight!r}, "
                         f"{discard_ratio!r}") from None
    if not 0.0 <= discard < 1.0:
        raise InputError(f"discard_ratio must be in [0, 1), got {discard_ratio}")
    if not 0.0 <= residual < float("inf"):
        raise InputError(f"residual_weight must be a finite number >= 0, got {residual_weight}")


def _discard_lowest(fused: torch.Tensor, pair_mask: torch.Tensor, discard_ratio: float) -> torch.Tensor:
    """Zero the lowest `discard_ratio` of each sample's real-token entries (exact count, stable ties).

    The diagonal is never discarded: the residual path keeps a token's own share anyway, and keeping it
    means a row can never lose all of its mass to discarding. Ranks are computed for a few matrices at a
    time (SORT_CHUNK_ENTRIES), so the int64 sort buffers stay small for long inputs and many layers.
    """
    batch, n, _ = fused.shape
    eye = torch.eye(n, dtype=torch.bool, device=fused.device)
    candidates = pair_mask.bool() & ~eye
    counts = torch.floor(candidates.reshape(batch, -1).sum(-1) * discard_ratio).long()
    flat = fused.masked_fill(~candidates, float("inf")).reshape(batch, n * n)
    drop = torch.empty(batch, n * n, dtype=torch.bool, device=fused.device)
    positions = torch.arange(n * n, device=fused.device)
    step = max(1, SORT_CHUNK_ENTRIES // (n * n))
    for first in range(0, batch, step):
        part = slice(first, first + step)
        order = torch.argsort(flat[part], dim=-1, stable=True)
        ranks = torch.empty_like(order).scatter_(-1, order, positions.expand_as(order))
        drop[part] = ranks < counts[part, None]
    return fused.masked_fill(drop.reshape(batch, n, n), 0.0)


def augment_layer(
    fused: torch.Tensor,
    *,
    residual_weight: float = 1.0,
    discard_ratio: float = 0.0,
    attention_mask: torch.Tensor | None = None,
) -> torch.Tensor:
    """One layer's Ã from head-fused attention (B, n, n): discard, add residual_weight·I, row-normalise.

    - Discarding zeroes the lowest `discard_ratio` of each matrix's off-diagonal real-token entries
      (floor of the count, stable ties). The diagonal is never discarded; the [CLS] column can be.

    - Padded rows and columns are set to exactly 0 before anything else. A masked softmax gives real
      queries no weight on padded keys, so real tokens get the same Ã as without padding.
    - Rows are normalised over the last axis (keepdim), so Ã is row-stochastic on real tokens.
    - A real row whose sum is 0 (e.g. residual_weight 0 and everything discarded) becomes the identity
      row: the token keeps itself. Never NaN or Inf.
    Computed in float32 (float64 for float64 input).
    """
    _check_options(residual_weight, discard_ratio)
    if fused.dim() != 3 or fused.shape[-1] != fused.shape[-2]:
        raise InputError(f"fused attention must be (batch, n, n), got shape {tuple(fused.shape)}")
    dtype = compute_dtype(fused.dtype)
    batch, n, _ = fused.shape
    real = None if attention_mask is None else real_token_mask(attention_mask, batch, n, fused.device, dtype)
    return _augment_(clean_rows(fused, real, 0, dtype), residual_weight, discard_ratio, real)


def _augment_(values: torch.Tensor, residual_weight: float, discard_ratio: float,
              real: torch.Tensor | None) -> torch.Tensor:
    """augment_layer's steps after cleaning, on rows the caller owns (in place unless discarding)."""
    if discard_ratio > 0:
        pair_mask = torch.ones_like(values) if real is None else real[:, :, None] * real[:, None, :]
        values = _discard_lowest(values, pair_mask, float(discard_ratio))
    return residual_normalise_(values, 0, residual_weight, real)


def _augmented_layers(
    attentions: Attentions,
    head_fusion: str,
    residual_weight: float,
    discard_ratio: float,
    start_layer: int,
    end_layer: int | None,
    attention_mask: torch.Tensor | None,
    drop_columns: torch.Tensor | None = None,
) -> torch.Tensor:
    """Ã of every selected layer, (L', B, n, n), from one batched augment_layer call (few large ops
    instead of many small ones: what keeps the overhead low next to a forward pass). `drop_columns`
    (L, B, n) bool over all layers zeroes fused attention to those keys before the residual is added."""
    all_layers = as_layers(attentions)
    _check_options(residual_weight, discard_ratio)
    layers = layer_range(len(all_layers), start_layer, end_layer)
    dtype = compute_dtype(all_layers[0].dtype)
    fused = fused_stack([all_layers[l] for l in layers], head_fusion, dtype)
    if drop_columns is not None:
        keep = ~drop_columns[list(layers)].to(device=fused.device, dtype=torch.bool)
        fused.mul_(keep[:, :, None, :].to(dtype))
    return _augment_stack_(fused, residual_weight, discard_ratio, attention_mask)


def _augment_stack_(fused: torch.Tensor, residual_weight: float, discard_ratio: float,
                    attention_mask: torch.Tensor | None, cleaned: bool = False) -> torch.Tensor:
    """augment_layer on every matrix of a contiguous (L, B, n, n) stack in the compute dtype, in place (one
    batched call: few large ops instead of many small ones); `cleaned`: as `augment_layers`."""
    count, batch, n, _ = fused.shape
    real = None if attention_mask is None else padding_only(
        real_token_mask(attention_mask, batch, n, fused.device, fused.dtype))
    mask = None if real is None else real.repeat(count, 1)
    values = fused.view(count * batch, n, n)
    if not cleaned:
        values = clean_rows(values, mask, 0, fused.dtype, copy=False)
    return _augment_(values, residual_weight, discard_ratio, mask).view(count, batch, n, n)


def attention_rollout(
    attentions: Attentions,
    *,
    head_fusion: str = "mean",
    residual_weight: float = 1.0,
    discard_ratio: float = 0.0,
    start_layer: int = 0,
    end_layer: int | None = None,
    attention_mask: torch.Tensor | None = None,
    all_layers: bool = False,
    drop_columns: torch.Tensor | None = None,
) -> torch.Tensor:
    """Rollout R = Ã_(end-1) ··· Ã_start, shape (B, n, n); with all_layers, (L', B, n, n) where entry k
    is the rollout through layers start..start+k (what a layer slider shows).

    `attentions`: L tensors (B, H, n, n) as transformers returns them, or one (L, B, H, n, n) tensor.
    `end_layer` is exclusive. Padded tokens (attention_mask 0) get exactly 0. `drop_columns`, (L, B, n)
    bool, removes attention to those keys in each layer before augmentation (sink-free rollout).
    """
    layers = _augmented_layers(
        attentions, head_fusion, residual_weight, discard_ratio, start_layer, end_layer, attention_mask,
        drop_columns,
    )
    return multiplied_(layers, all_layers=all_layers)


def row_weights(rows: int | Sequence[int] | torch.Tensor, batch: int, n: int, device: torch.device,
                dtype: torch.dtype) -> torch.Tensor:
    """Explained rows as weight vectors (B, k, n): ints become one-hot rows; a (B, k, n) or (k, n) tensor
    of weights (e.g. uniform over pooled tokens for a mean-pooled encoder) is used as given."""
    if isinstance(rows, torch.Tensor) and rows.is_floating_point():
        weights = rows.to(device=device, dtype=dtype)
        if weights.dim() == 2:
            weights = weights.expand(batch, -1, -1)
        if weights.dim() != 3 or weights.shape[0] != batch or weights.shape[-1] != n:
            raise InputError(f"row weights must be (batch, k, n) with n={n}, got {tuple(rows.shape)}")
        return weights
    indices = [int(rows)] if isinstance(rows, int) else [int(r) for r in rows]
    if not indices:
        raise InputError("no rows were asked for")
    bad = [r for r in indices if not -n <= r < n]
    if bad:
        raise InputError(f"rows {bad} are outside the {n} positions")
    one_hot = torch.zeros(len(indices), n, device=device, dtype=dtype)
    one_hot[torch.arange(len(indices)), torch.tensor(indices) % n] = 1.0
    return one_hot.expand(batch, -1, -1)


def rollout_rows(
    attentions: Attentions,
    rows: int | Sequence[int] | torch.Tensor,
    *,
    head_fusion: str = "mean",
    residual_weight: float = 1.0,
    discard_ratio: float = 0.0,
    start_layer: int = 0,
    end_layer: int | None = None,
    attention_mask: torch.Tensor | None = None,
    all_layers: bool = False,
) -> torch.Tensor:
    """Only the requested rows of the rollout, (B, k, n) (with all_layers (L', B, k, n)), by vector-matrix
    products (`chain_rows`): what a [CLS]-row explanation needs. Equal to the rows of attention_rollout."""
    layers = _augmented_layers(
        attentions, head_fusion, residual_weight, discard_ratio, start_layer, end_layer, attention_mask
    )
    _, batch, n, _ = layers.shape
    return chain_rows(row_weights(rows, batch, n, layers.device, layers.dtype), layers, all_layers=all_layers)


def augment_layers(
    maps: torch.Tensor,
    *,
    residual_weight: float = 1.0,
    discard_ratio: float = 0.0,
    attention_mask: torch.Tensor | None = None,
    in_place: bool = False,
    cleaned: bool = False,
) -> torch.Tensor:
    """Ã of every layer of a stack of one-matrix-per-layer maps (L, B, n, n) (head-fused attention as
    `fused_layers` gives it, or a contribution method's matrices): what attention_rollout multiplies, with the
    same discard, residual and padding rules (`augment_layer`). A new tensor, or `maps` itself with `in_place`
    (when it is contiguous and in the compute dtype already). `cleaned`: `maps` are cleaned as `fused_layers`
    cleans (no NaN, infinity or negative; padded rows and columns 0), which is then not done again."""
    if maps.dim() != 4 or maps.shape[-1] != maps.shape[-2]:
        raise InputError(f"layer maps must be (layers, batch, n, n), got shape {tuple(maps.shape)}")
    _check_options(residual_weight, discard_ratio)
    dtype = compute_dtype(maps.dtype)
    owned = in_place and maps.dtype == dtype and maps.is_contiguous()
    values = maps if owned else maps.to(dtype=dtype, memory_format=torch.contiguous_format, copy=True)
    return _augment_stack_(values, residual_weight, discard_ratio, attention_mask, cleaned)


def multiplied_(layers: torch.Tensor, *, all_layers: bool = False) -> torch.Tensor:
    """The product of augmented `layers` (L', B, n, n), Ã_start rightmost: (B, n, n), or with all_layers every
    cumulative product R_t = Ã_t···Ã_start written over the stack in place, (L', B, n, n)."""
    if all_layers:
        for k in range(1, layers.shape[0]):
            layers[k] = torch.bmm(layers[k], layers[k - 1])
        return layers
    product = layers[0]
    for augmented in layers[1:]:
        product = torch.bmm(augmented, product)
    return product


def chain_rows(weights: torch.Tensor, layers: torch.Tensor, *, all_layers: bool = False) -> torch.Tensor:
    """Rows `weights` (B, k, n) of the product of `layers` (L', B, n, n), Ã_start first: (B, k, n), or with
    all_layers (L', B, k, n) the rows of every R_t = Ã_t···Ã_start. Vector-matrix products from the top layer down
    (k·n² per layer and row instead of the n³ of a full product): with all_layers every v·R_t is carried down
    together, one batched product per layer (k·L'²/2 vector-matrix products in all: cheaper than the full matrix
    while k·L'/2 < n). Equal to the rows of attention_rollout's product to float rounding."""
    count, batch, n, _ = layers.shape
    k = weights.shape[1]
    if not all_layers:
        vector = weights
        for augmented in reversed(layers):
            vector = torch.bmm(vector, augmented)
        return vector
    # rows t*k:(t+1)*k hold v·R_t; at layer l every vector whose top is at or above l passes through Ã_l: the new
    # rows v (top l) joined before the ones carried down (the same products, one cat and one bmm a layer)
    per_layer = layers.unbind(0)
    vectors = torch.bmm(weights, per_layer[-1])
    for l in range(count - 2, -1, -1):
        vectors = torch.bmm(torch.cat((weights, vectors), dim=1), per_layer[l])
    return vectors.view(batch, count, k, n).transpose(0, 1)


def fused_layers(
    attentions: Attentions,
    *,
    head_fusion: str = "mean",
    attention_mask: torch.Tensor | None = None,
) -> torch.Tensor:
    """Head-fused attention of every layer, (L, B, n, n), cleaned as rollout reads it: NaN, infinities and
    negatives 0, padded rows and columns 0; rows not renormalised (a max or min over heads does not sum to 1)."""
    fused = fused_copy(attentions, head_fusion)
    dtype = fused.dtype
    _, batch, n, _ = fused.shape
    real = None if attention_mask is None else padding_only(real_token_mask(attention_mask, batch, n, fused.device,
                                                                             dtype))
    fused.nan_to_num_(nan=0.0, posinf=0.0, neginf=0.0).clamp_min_(0.0)
    if real is not None:
        fused.mul_(real[:, :, None] * real[:, None, :])
    return fused


def layer_attention(
    attentions: Attentions,
    *,
    head_fusion: str = "mean",
    attention_mask: torch.Tensor | None = None,
) -> torch.Tensor:
    """Raw head-fused attention of every layer, (L, B, n, n): padded rows/columns 0, real rows
    renormalised over real tokens (no residual). The slider's "this layer only" view."""
    fused = fused_layers(attentions, head_fusion=head_fusion, attention_mask=attention_mask)
    # a row summing to 0 holds only zeros (none is negative), and 0 / tiny is 0: such rows stay as they are
    return fused.div_(fused.sum(dim=-1, keepdim=True).clamp_min(torch.finfo(fused.dtype).tiny))
