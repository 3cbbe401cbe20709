"""Gradient x input: each input feature times the explained class logit's gradient, summed per token or patch.

Attention-free: one of the references the faithfulness evaluation compares the attention methods with (its rank
agreement measure `spearman_gxi`); the same numbers as a method of its own. Signed: negative values speak against
the class."""
from __future__ import annotations

from typing import TYPE_CHECKING, Callable

from rollout_core.methods._gradients import GRADIENT_ATTRIBUTION, per_position
from rollout_core.methods._rows import one_map
from rollout_core.methods._cost import forward_seconds, pass_seconds
from rollout_core.methods._spec import MethodInput, MethodOutput, MethodSpec, Workload

if TYPE_CHECKING:
    import torch

    from rollout_core.inputs.continuous import PreparedInput


def attribute(prepared: "PreparedInput", target: int,
              progress: "Callable[[int], None] | None" = None) -> "torch.Tensor":
    """(n,) gradient x input of the target logit on a prepared input, summed per position (one pass)."""
    from rollout_core.cancel import checkpoint
    from rollout_core.maths.attribution import input_x_gradient

    checkpoint()
    scores = prepared.to_positions(input_x_gradient(prepared.forward, prepared.x, target)[0])
    if progress is not None:
        progress(1)
    return scores


def compute(method_input: MethodInput) -> MethodOutput:
    """The gradient x input of each position, the same map at every layer of the range."""
    return one_map(per_position(method_input, attribute), method_input)


GRADIENT_PASSES = 2.5
"""A forward and backward pass on the input's features, in units of a plain forward pass (as AttnLRP's)."""
SETUP_SECONDS = 0.002
"""Per input: its continuous form and baseline."""


def cost(w: Workload) -> float:
    """The capture's forward pass, then one forward and backward pass per input on its continuous form (the inputs
    of a batch one by one, each paying the per-layer overhead)."""
    return forward_seconds(w) + w.batch * (GRADIENT_PASSES * pass_seconds(w) + SETUP_SECONDS)


METHOD = MethodSpec(
    name="grad_x_input",
    title="Gradient x input (reference)",
    phrase="gradient x input (class-specific, attention-free)",
    description="Multiplies each input embedding (or pixel) by the gradient of the class logit and sums per token "
                "or patch; one backward pass, no attention read.",
    use_when="As an attention-free baseline to check an attention method against; cheap, but noisy on deep models.",
    explains="How much each input's features, times the class logit's gradient, push the logit up (positive) or "
             "down (negative).",
    **GRADIENT_ATTRIBUTION,
    agreement="gxi",
    attribute=attribute,
    cost=cost,
    compute=compute,
)
