"""Integrated gradients (Sundararajan et al. 2017): the class logit's gradient integrated along the straight path
from a baseline to the input, times the difference, summed per token or patch.

The baseline is what the faithfulness evaluation calls a removed position (rollout_core.inputs.continuous: the
[MASK] token's embedding; the image's mean colour), so "removing" means the same thing everywhere; special tokens
equal their baseline and get exactly zero. The explained output is the logit of the class (the probability's
gradient vanishes once the model is confident). Completeness: the values sum to the logit's change from the
baseline up to the quadrature error, which the settings keep as `ig_completeness_gap`. Attention-free: one of the
evaluation's references (its rank agreement measure `spearman_ig`)."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable

from rollout_core.methods._gradients import GRADIENT_ATTRIBUTION, per_position
from rollout_core.methods._rows import one_map
from rollout_core.methods._cost import forward_seconds, pass_seconds
from rollout_core.methods._spec import MethodInput, MethodOutput, MethodSpec, Workload
from rollout_core.methods.grad_x_input import SETUP_SECONDS

if TYPE_CHECKING:
    import torch

    from rollout_core.inputs.continuous import PreparedInput

STEPS = 32
CHUNKS = 4
"""The steps run in this many forward passes, with a stop checkpoint (and a progress report) at each."""


def attribute(prepared: "PreparedInput", target: int, progress: "Callable[[int], None] | None" = None, *,
              steps: int = STEPS) -> "torch.Tensor":
    """(n,) integrated gradients of the target logit from the removal baseline, summed per position. The steps
    run in CHUNKS passes; a stop checkpoint precedes each and progress(steps done) follows it."""
    from rollout_core.cancel import checkpoint
    from rollout_core.maths.attribution import integrated_gradients

    done = [0]

    def forward(inputs: "torch.Tensor") -> "torch.Tensor":
        checkpoint()  # a stopped page session stops its integrated gradients here (rollout_core.cancel)
        out = prepared.forward(inputs)
        done[0] += int(inputs.shape[0])
        if progress is not None:
            progress(min(done[0], int(steps)))
        return out

    chunk = max(1, -(-int(steps) // CHUNKS))
    features = integrated_gradients(forward, prepared.x, prepared.baseline, target, steps=int(steps), chunk=chunk)
    return prepared.to_positions(features[0])


def compute(method_input: MethodInput) -> MethodOutput:
    """The integrated gradients of each position, the same map at every layer of the range."""
    from rollout_core.maths.attribution import completeness_gap

    gaps = []

    def attributed(prepared: Any, target: int) -> Any:
        scores = attribute(prepared, target)
        gaps.append(completeness_gap(prepared.forward, prepared.x, prepared.baseline, target, scores))
        return scores

    out = one_map(per_position(method_input, attributed), method_input)
    out.extras = {"ig_steps": STEPS, "ig_completeness_gap": max(gaps)}
    return out


def describe(settings: dict[str, Any]) -> str:
    """The facts line: steps and how far the values are from summing to the logit's change."""
    gap = settings.get("ig_completeness_gap")
    if gap is None:
        return ""
    return (f"integrated gradients: {settings.get('ig_steps', STEPS)} steps from the removal baseline; the values "
            f"sum to the logit's change up to {gap:.2g}")


STEP_PASSES = 2.2
"""A forward and backward pass of a batch of steps, in units of a plain forward pass of that batch (measured)."""


def cost(w: Workload) -> float:
    """The capture's forward pass, then per input (one by one): the steps' forward and backward passes, CHUNKS
    batches of STEPS / CHUNKS rows, and the completeness check's pass on two rows."""
    steps = STEP_PASSES * CHUNKS * pass_seconds(w, STEPS / CHUNKS)
    return forward_seconds(w) + w.batch * (steps + pass_seconds(w, 2) + SETUP_SECONDS)


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
    **GRADIENT_ATTRIBUTION,
    agreement="ig",
    attribute=attribute,
    passes=STEPS,
    facts=describe,
    cost=cost,
    compute=compute,
)
