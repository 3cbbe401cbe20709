"""Gradient x input: each input feature times the explained class logit's gradient, summed per token or patch.

Attention-free: the reference the faithfulness evaluation compares the attention methods with, here as a method of
its own (the same numbers). Signed: negative values speak against the class."""
from rollout_core.methods._rows import one_map
from rollout_core.methods._spec import MethodInput, MethodOutput, MethodSpec


def compute(method_input: MethodInput) -> MethodOutput:
    """The gradient x input of each position, the same map at every layer of the range."""
    from rollout_core.maths.attribution import input_x_gradient
    from rollout_core.methods._gradients import per_position

    scores = per_position(method_input, lambda prepared, target: prepared.to_positions(
        input_x_gradient(prepared.forward, prepared.x, target)[0]))
    return one_map(scores, method_input)


METHOD = MethodSpec(
    name="grad_x_input",
    title="Gradient x input (reference)",
    phrase="gradient x input (class-specific, attention-free)",
    description="Multiplies each input embedding (or pixel) by the gradient of the class logit and sums per token "
                "or patch; one backward pass, no attention read.",
    use_when="As an attention-free baseline to check an attention method against; cheap, but noisy on deep models.",
    explains="How much each input's features, times the class logit's gradient, push the logit up (positive) or "
             "down (negative).",
    class_specific=True,
    signed=True,
    needs_classes=True,
    uses_head_fusion=False,
    uses_residual=False,
    cumulative=False,
    layered=False,
    compute=compute,
)
