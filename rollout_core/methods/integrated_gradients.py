"""Integrated gradients (Sundararajan et al. 2017): the class logit's gradient integrated along the straight path
from a baseline (the [MASK] token's embedding; the image's mean colour) to the input, times the difference.

Attention-free: the reference the faithfulness evaluation compares the attention methods with, here as a method of
its own (the same numbers, 32 Gauss-Legendre steps). Its values sum to the logit's change from the baseline up to
the quadrature error, which the settings keep as `ig_completeness_gap`."""
from typing import Any

from rollout_core.methods._rows import one_map
from rollout_core.methods._spec import MethodInput, MethodOutput, MethodSpec

STEPS = 32
CHUNK = 8
"""Path points per forward pass (the evaluation's: 32 steps in 4 passes)."""


def compute(method_input: MethodInput) -> MethodOutput:
    """The integrated gradients of each position, the same map at every layer of the range."""
    from rollout_core.maths.attribution import completeness_gap, integrated_gradients
    from rollout_core.methods._gradients import per_position

    gaps = []

    def attribute(prepared: Any, target: int) -> Any:
        features = integrated_gradients(prepared.forward, prepared.x, prepared.baseline, target, steps=STEPS,
                                        chunk=CHUNK)
        gaps.append(completeness_gap(prepared.forward, prepared.x, prepared.baseline, target, features))
        return prepared.to_positions(features[0])

    out = one_map(per_position(method_input, attribute), method_input)
    out.extras = {"ig_steps": STEPS, "ig_completeness_gap": max(gaps)}
    return out


def describe(settings: dict[str, Any]) -> str:
    """The facts line: steps and how far the values are from summing to the logit's change."""
    gap = settings.get("ig_completeness_gap")
    if gap is None:
        return ""
    return (f"integrated gradients: {settings.get('ig_steps', STEPS)} steps from the removal baseline; the values "
            f"sum to the logit's change up to {gap:.2g}")


METHOD = MethodSpec(
    name="integrated_gradients",
    title="Integrated gradients (reference)",
    phrase="integrated gradients (class-specific, attention-free)",
    description="Integrates the class logit's gradient from a baseline ([MASK] embeddings, the mean colour) to the "
                "input in 32 steps; signed values that sum to the logit's change. About 33 model runs.",
    use_when="As the attention-free reference with an exactness guarantee (completeness); costs about 33 model runs "
             "with gradients.",
    explains="How much each input moves the class logit from the baseline to the input (positive: up); the values "
             "sum to that change.",
    class_specific=True,
    signed=True,
    needs_classes=True,
    uses_head_fusion=False,
    uses_residual=False,
    cumulative=False,
    layered=False,
    facts=describe,
    compute=compute,
)
