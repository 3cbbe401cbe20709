"""The step every cumulative-matrix method shares: explained rows from the per-layer (L', B, n, n) matrices."""
from __future__ import annotations

from typing import TYPE_CHECKING

from rollout_core.methods._spec import MethodInput, MethodOutput

if TYPE_CHECKING:
    import torch


def rows_of(cumulative: "torch.Tensor", method_input: MethodInput) -> MethodOutput:
    """Mix each layer's matrix rows by the input's row weights; the final matrix is the last layer's."""
    import torch

    from rollout_core.maths.rollout import compute_dtype

    w = method_input.weights.to(compute_dtype(method_input.captured.attentions[0].dtype))
    return MethodOutput(layer_rows=torch.einsum("bi,lbij->lbj", w, cumulative.to(w.dtype)), matrix=cumulative[-1])
