"""Gradient-weighted rollout (Chefer et al. 2021): heads weighted by the gradient of the explained score."""
from rollout_core.methods._rows import rows_of
from rollout_core.methods._cost import forward_seconds, product_seconds
from rollout_core.methods._spec import MethodInput, MethodOutput, MethodSpec, Workload


def compute(method_input: MethodInput) -> MethodOutput:
    """Gradient-weighted rollout after each layer of the range (the capture kept the gradients)."""
    from rollout_core.maths.gradient import gradient_rollout

    o, captured = method_input.options, method_input.captured
    cumulative = gradient_rollout(captured.attentions, captured.gradients, start_layer=o.start_layer,
                                  end_layer=o.end_layer, attention_mask=method_input.mask, all_layers=True)
    return rows_of(cumulative, method_input)



GRADIENT_PASSES = 2.0
"""A forward pass that keeps its graph and the backward pass, in units of a plain forward pass (measured)."""


def cost(w: Workload) -> float:
    """A forward and a backward pass, and the product of the gradient-weighted matrices."""
    return forward_seconds(w, GRADIENT_PASSES) + product_seconds(w)


METHOD = MethodSpec(
    name="gradient",
    title="Gradient-weighted rollout",
    phrase="gradient-weighted rollout (class-specific)",
    description="Weights each head's attention by the positive part of its gradient for the class, then rolls out.",
    use_when="To ask why this class and not another (class-specific) from attention alone; cheap, and strong on "
             "classifiers.",
    explains="How relevant each input is to the explained class: attention weighted by its gradient, rolled out.",
    class_specific=True,
    needs_gradients=True,
    uses_head_fusion=False,
    uses_residual=False,
    uses_discard=False,
    cost=cost,
    compute=compute,
)
