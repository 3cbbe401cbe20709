"""The steps the cumulative-matrix methods share: explained rows from per-layer (L', B, n, n) matrices (rolled out
like attention, or already multiplied), the compute of a contribution method, and the check that a model's layers
can be read."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, ContextManager

from rollout_core.methods._spec import MethodInput, MethodOutput, RolledOut

if TYPE_CHECKING:
    import torch


def rows_of(cumulative: "torch.Tensor", method_input: MethodInput) -> MethodOutput:
    """Mix each layer's matrix rows by the input's row weights; the final matrix is the last layer's."""

    from rollout_core.maths.rollout import compute_dtype

    w = method_input.weights.to(compute_dtype(method_input.captured.attentions[0].dtype))
    return MethodOutput(layer_rows=weighted_rows(w, cumulative.to(w.dtype)), matrix=cumulative[-1])


def weighted_rows(weights: "torch.Tensor", matrices: "torch.Tensor") -> "torch.Tensor":
    """sum_i weights[b, i] * matrices[l, b, i, :], (L, B, n): one batched vector-matrix product per layer (what
    einsum("bi,lbij->lbj") computes, 5x faster on 512 tokens)."""
    return (weights[:, None, :] @ matrices).squeeze(-2)


def one_map(scores: "torch.Tensor", method_input: MethodInput) -> MethodOutput:
    """A method with one (B, n) map of the whole model: the same rows at every layer of the range."""
    o = method_input.options
    return MethodOutput(layer_rows=scores.unsqueeze(0).repeat(o.end_layer - o.start_layer, 1, 1), matrix=None)


def contribution_method(contributions: "Callable[[MethodInput], torch.Tensor]", *,
                        add_residual: bool) -> Callable[[MethodInput], MethodOutput]:
    """The compute function of a contribution method. `contributions(input)`: (L, B, n, n) row-normalised
    contributions of every model layer. add_residual False for measures that already contain the residual stream
    (ALTI, value zeroing: rolled out with residual 0), True to add the options' residual weight (norm-based)."""
    def compute(method_input: MethodInput) -> MethodOutput:
        residual = method_input.options.residual_weight if add_residual else 0.0
        return contribution_rollout(contributions(method_input), method_input, residual_weight=residual)

    return compute


def contribution_rollout(per_layer: "torch.Tensor", method_input: MethodInput, *,
                         residual_weight: float) -> MethodOutput:
    """`per_layer`: (L, B, n, n) row-normalised contributions of every model layer. The chosen range's layers are
    rolled out (`rolled_out`); they are also the slider's per-layer view (`layer_maps`)."""
    o = method_input.options
    return rolled_out(per_layer[o.start_layer:o.end_layer], method_input, residual_weight=residual_weight)


def rolled_out(maps: "torch.Tensor", method_input: MethodInput, *, residual_weight: float,
               fused_attention: bool = False) -> MethodOutput:
    """`maps` (L', B, n, n), one matrix per layer of the range (head-fused attention, contributions): each
    augmented like attention in rollout (discard, + residual_weight * I, rows renormalised) and multiplied. Only
    the explained rows after each layer are computed here (`chain_rows`: vector-matrix products); the final n x n
    product is left to whoever asks for it (`MethodOutput.rolled_out`). `maps` are the per-layer view; with
    `fused_attention` (`maps` are `fused_layers`' head-fused attention, this call's own: already cleaned, and a max
    or min over heads does not sum to 1) the view is their rows renormalised, and `maps` is augmented in place.
    Discarding ranks entries across a whole matrix, which the renormalised view rebuilds only to rounding: that
    product is computed here."""
    import torch

    from rollout_core.maths.rollout import augment_layers, chain_rows, compute_dtype, multiplied_

    o = method_input.options
    dtype = compute_dtype(maps.dtype)
    maps = maps if maps.dtype == dtype else maps.to(dtype)
    sums = maps.sum(dim=-1) if fused_attention else None
    view = maps if sums is None else maps / sums.clamp_min(torch.finfo(maps.dtype).tiny).unsqueeze(-1)
    augmented = augment_layers(maps, residual_weight=residual_weight, discard_ratio=o.discard_ratio,
                               attention_mask=method_input.mask, in_place=fused_attention, cleaned=fused_attention)
    w = method_input.weights.to(augmented.dtype)
    rows = chain_rows(w[:, None], augmented, all_layers=True)[:, :, 0]
    if sums is not None and o.discard_ratio > 0:
        return MethodOutput(layer_rows=rows, matrix=multiplied_(augmented), layer_maps=view)
    return MethodOutput(layer_rows=rows, matrix=None, layer_maps=view, map_sums=sums,
                        rolled_out=RolledOut(float(residual_weight), float(o.discard_ratio)))


def layer_recorder(purpose: str) -> Callable[[Any], ContextManager[Any]]:
    """A spec's recorder: the states the contribution measures need, recorded during the forward pass
    (models.layer_access.recording; a clear error naming `purpose` on a family whose layers it cannot read)."""
    def recorder(model: Any) -> ContextManager[Any]:
        from rollout_core.models.layer_access import recording

        return recording(model, purpose)

    return recorder


def readable_layers(purpose: str) -> Callable[[Any], Any]:
    """A spec's `requires`: the model's family is one whose layers models.layer_access reads (the error naming
    the supported families otherwise, starting with `purpose`)."""
    def requires(handle: Any) -> Any:
        from rollout_core.models.layer_access import unsupported

        return unsupported(handle.model, purpose)

    return requires


def row_normalised(contributions: "torch.Tensor") -> "torch.Tensor":
    """Rows divided by their sum (all-zero rows, i.e. padding, stay 0)."""
    import torch

    total = contributions.sum(-1, keepdim=True)
    return contributions / total.clamp_min(torch.finfo(contributions.dtype).tiny)
