"""Norm-based attention rollout (Kobayashi et al. 2020, "Attention is not only a weight"): ||α_ij f(x_j)||."""
from rollout_core.methods._spec import MethodInput, MethodOutput, MethodSpec


def compute(method_input: MethodInput) -> MethodOutput:
    """Each layer's norms ||sum_h α^h_ij f^h(x_j)||, rows normalised, rolled out like attention (with the residual)."""
    from rollout_core.maths.contributions import norm_contributions
    from rollout_core.methods._contributions import contribution_rollout, row_normalised

    per_layer = row_normalised(norm_contributions(method_input.recorded, method_input.mask))
    return contribution_rollout(per_layer, method_input, residual_weight=method_input.options.residual_weight)


def _recorder(model):
    from rollout_core.models.layer_access import recording

    return recording(model, "Norm-based rollout")


METHOD = MethodSpec(
    name="norm",
    title="Norm-based rollout",
    phrase="norm-based attention rollout",
    description="Weights each attention edge by the size of the vector it carries, ||α·f(x)|| with the value and "
                "output projections (Kobayashi et al. 2020), then rolls out with the residual.",
    order=4,
    uses_head_fusion=False,
    layer_view="norm-based attention",
    recorder=_recorder,
    compute=compute,
)
