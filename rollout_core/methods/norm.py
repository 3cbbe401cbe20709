"""Norm-based attention rollout (Kobayashi et al. 2020, "Attention is not only a weight"): ||α_ij f(x_j)||."""
from __future__ import annotations

from typing import TYPE_CHECKING

from rollout_core.methods._rows import contribution_method, layer_recorder, readable_layers, row_normalised
from rollout_core.methods._cost import forward_seconds, pair_seconds, rows_seconds
from rollout_core.methods._spec import MethodInput, MethodSpec, Workload

if TYPE_CHECKING:
    import torch


def _contributions(method_input: MethodInput) -> torch.Tensor:
    """Each layer's norms ||sum_h α^h_ij f^h(x_j)||, rows normalised; rolled out like attention, with the residual."""
    from rollout_core.maths.contributions import norm_contributions

    return row_normalised(norm_contributions(method_input.recorded, method_input.mask))



def cost(w: Workload) -> float:
    """One recorded forward pass, the (n, n, d) transformed vectors' norms per layer, the explained rows rolled
    out (the final product deferred)."""
    return forward_seconds(w) + pair_seconds(w) + rows_seconds(w)


METHOD = MethodSpec(
    name="norm",
    title="Norm-based rollout",
    phrase="norm-based attention rollout",
    description="Weights each attention edge by the size of the vector it carries, ||α·f(x)|| with the value and "
                "output projections (Kobayashi et al. 2020), then rolls out with the residual.",
    use_when="When attention weights mislead because the vectors they move differ in size; a cheap refinement of "
             "rollout.",
    explains="How much of each input's transformed vector reaches the explained output, rolled out.",
    uses_head_fusion=False,
    layer_view="norm-based attention",
    recorder=layer_recorder("Norm-based rollout"),
    requires=readable_layers("Norm-based rollout"),
    cost=cost,
    compute=contribution_method(_contributions, add_residual=True),
)
