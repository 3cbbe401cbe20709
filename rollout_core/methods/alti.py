"""ALTI rollout (Ferrando et al. 2022): each layer's token contributions, residual and layer norm included, rolled out."""
from rollout_core.methods._spec import MethodInput, MethodOutput, MethodSpec


def compute(method_input: MethodInput) -> MethodOutput:
    """ALTI contributions per layer, multiplied through the range without an added residual: ALTI already contains
    it (as compute_joint_attention(..., add_residual=False) in mt-upc/transformer-contributions)."""
    from rollout_core.maths.contributions import alti_contributions
    from rollout_core.methods._contributions import contribution_rollout

    per_layer = alti_contributions(method_input.recorded, method_input.mask)
    return contribution_rollout(per_layer, method_input, residual_weight=0.0)


def _recorder(model):
    from rollout_core.models.layer_access import recording

    return recording(model, "ALTI rollout")


METHOD = MethodSpec(
    name="alti",
    title="ALTI rollout",
    phrase="ALTI rollout",
    description="Measures how close each token's transformed vector (attention, residual and layer norm) is to the "
                "layer's output, by L1 distance (Ferrando et al. 2022), then multiplies these contributions "
                "through the layers.",
    order=5,
    uses_head_fusion=False,
    uses_residual=False,
    layer_view="ALTI contributions",
    recorder=_recorder,
    compute=compute,
)
