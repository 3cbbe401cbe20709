"""Value-zeroing rollout (Mohebbi et al. 2023): how much each layer's output changes when token j's value is zeroed."""
from contextlib import contextmanager

from rollout_core.methods._spec import MethodInput, MethodOutput, MethodSpec


def compute(method_input: MethodInput) -> MethodOutput:
    """Value-zeroing scores per layer, multiplied through the range without an added residual (the re-run layer
    keeps its residual; hmohebbi/ValueZeroing rolls out with res=False)."""
    from rollout_core.maths.value_zeroing import value_zeroing_contributions
    from rollout_core.methods._contributions import contribution_rollout

    per_layer = value_zeroing_contributions(method_input.handle.model, method_input.captured.outputs.hidden_states,
                                            method_input.mask)
    return contribution_rollout(per_layer, method_input, residual_weight=0.0)


@contextmanager
def _supported(model):
    """Fails before the forward pass on a family whose layers cannot be re-run one by one."""
    from rollout_core.models.layer_access import layer_access

    yield layer_access(model, "Value-zeroing rollout")


METHOD = MethodSpec(
    name="value_zeroing",
    title="Value-zeroing rollout",
    phrase="value-zeroing rollout",
    description="Re-runs each layer with one token's value vectors set to zero and takes the cosine distance of "
                "every output from the original (Mohebbi et al. 2023), then multiplies these scores through the "
                "layers.",
    order=6,
    needs_hidden_states=True,
    uses_head_fusion=False,
    uses_residual=False,
    layer_view="value-zeroing scores",
    recorder=_supported,
    compute=compute,
)
