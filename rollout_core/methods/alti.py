"""ALTI rollout (Ferrando et al. 2022): each layer's token contributions, residual and layer norm included, rolled
out."""
from __future__ import annotations

from typing import TYPE_CHECKING

from rollout_core.methods._rows import contribution_method, layer_recorder, readable_layers
from rollout_core.methods._cost import forward_seconds, pair_seconds, rows_seconds
from rollout_core.methods._spec import MethodInput, MethodSpec, Workload

if TYPE_CHECKING:
    import torch


def _contributions(method_input: MethodInput) -> torch.Tensor:
    """ALTI contributions per layer, rolled out without an added residual: ALTI already contains it (as
    compute_joint_attention(..., add_residual=False) in mt-upc/transformer-contributions)."""
    from rollout_core.maths.contributions import alti_contributions

    return alti_contributions(method_input.recorded, method_input.mask)



ALTI_PAIR_FACTOR = 0.03
"""ALTI's work per pair, head and hidden unit (the transformed vectors T_i(x_j), a product with the heads as its inner
dimension, then their L1 distances in float64), in units of the norms' work per pair and head (measured)."""


def cost(w: Workload) -> float:
    """One recorded forward pass, ALTI's (n, n, d) transformed vectors per layer, the explained rows rolled out
    (the final product deferred)."""
    return forward_seconds(w) + pair_seconds(w, ALTI_PAIR_FACTOR * w.hidden) + rows_seconds(w)


METHOD = MethodSpec(
    name="alti",
    title="ALTI rollout",
    phrase="ALTI rollout",
    description="Measures how close each token's transformed vector (attention, residual and layer norm) is to the "
                "layer's output, by L1 distance (Ferrando et al. 2022), then multiplies these contributions "
                "through the layers.",
    use_when="To follow where information flows with the residual stream and layer norms counted; the best-pointing "
             "aggregate of the layers on text.",
    explains="How much each input contributes to the explained output's vector, layer norm and residual "
             "included, rolled out.",
    uses_head_fusion=False,
    uses_residual=False,
    layer_view="ALTI contributions",
    recorder=layer_recorder("ALTI rollout"),
    requires=readable_layers("ALTI rollout"),
    cost=cost,
    compute=contribution_method(_contributions, add_residual=False),
)
