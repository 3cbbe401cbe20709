"""AttnLRP (Achtibat et al. 2024): layer-wise relevance propagation with attention-aware rules.

The capture's forward and backward pass run inside `maths.lrp.attnlrp_rules` (the spec's recorder), so the
gradient of the explained score w.r.t. the encoder input is the modified gradient; relevance of a token =
its input embedding times that gradient, summed over the embedding. One map for the whole model: the slider's
every layer shows it (the layer range does not apply). Signed: negative relevance speaks against the class.
"""
from rollout_core.methods._rows import one_map
from rollout_core.methods._cost import forward_seconds
from rollout_core.methods._spec import MethodInput, MethodOutput, MethodSpec, Workload


def _rules(model):  # the recorder: imported lazily so the registry does not import torch
    from rollout_core.maths.lrp import attnlrp_rules

    return attnlrp_rules(model)


def _family(handle):
    from rollout_core.errors import UnsupportedModelError
    from rollout_core.models.layer_access import unsupported

    if unsupported(handle.model) is None:
        return None
    return UnsupportedModelError(f"AttnLRP is available for BERT-like and ViT-like encoders, not {handle.family}")


def compute(method_input: MethodInput) -> MethodOutput:
    """The relevance of each input token, repeated for each layer of the range (one map, not per layer)."""
    from rollout_core.errors import UnsupportedModelError
    from rollout_core.maths.lrp import token_relevance

    captured = method_input.captured
    if captured.input_gradients is None:
        raise UnsupportedModelError("AttnLRP: the explained score does not depend on this model's input "
                                    "embeddings as returned in its hidden states; choose another method")
    relevance = token_relevance(captured.outputs.hidden_states[0], captured.input_gradients)
    if method_input.mask is not None:
        relevance = relevance * method_input.mask.to(relevance.dtype)
    return one_map(relevance, method_input)



LRP_PASSES = 2.5
"""A forward and backward pass under the LRP rules, in units of a plain forward pass (measured)."""


def cost(w: Workload) -> float:
    """A forward and a backward pass through the modified rules."""
    return forward_seconds(w, LRP_PASSES)


METHOD = MethodSpec(
    name="attnlrp",
    title="AttnLRP (relevance propagation)",
    phrase="AttnLRP relevance (class-specific, whole model)",
    description="Propagates the class score back to the input tokens with attention-aware LRP rules "
                "(Achtibat et al. 2024); one signed map for the whole model, relevance summing to about the score.",
    use_when="To see the evidence for and against a class in one signed map of the whole model; removes the evidence "
             "fastest on images.",
    explains="How much each input speaks for (positive) or against (negative) the explained class: relevance "
             "propagated back through the whole model.",
    class_specific=True,
    signed=True,
    needs_gradients=True,
    needs_hidden_states=True,
    uses_head_fusion=False,
    uses_residual=False,
    uses_discard=False,
    cumulative=False,
    layered=False,
    can_stream=False,
    recorder=_rules,
    requires=_family,
    cost=cost,
    compute=compute,
)
