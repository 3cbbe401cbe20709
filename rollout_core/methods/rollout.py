"""Attention rollout (Abnar & Zuidema 2020): the product of residual-augmented, head-fused attention."""
from rollout_core.methods._rows import rows_of
from rollout_core.methods._cost import forward_seconds, product_seconds
from rollout_core.methods._spec import MethodInput, MethodOutput, MethodSpec, Workload


def compute(method_input: MethodInput) -> MethodOutput:
    """Rollout after each layer of the range."""
    from rollout_core.maths.rollout import attention_rollout

    o = method_input.options
    cumulative = attention_rollout(
        method_input.captured.attentions, head_fusion=o.head_fusion, residual_weight=o.residual_weight,
        discard_ratio=o.discard_ratio, start_layer=o.start_layer, end_layer=o.end_layer,
        attention_mask=method_input.mask, all_layers=True)
    return rows_of(cumulative, method_input)



def cost(w: Workload) -> float:
    """One forward pass and the product of the range's n x n matrices."""
    return forward_seconds(w) + product_seconds(w)


METHOD = MethodSpec(
    name="rollout",
    title="Attention rollout",
    phrase="attention rollout",
    description="Multiplies each layer's head-fused attention, mixed with the residual identity, through the layers.",
    use_when="The classic (Abnar & Zuidema 2020): to watch attention mix the tokens layer by layer; on a model "
             "fine-tuned on top of a frozen backbone the frozen layers' mixing drowns the evidence.",
    explains="How much of each input's information reaches the explained output, following attention and the "
             "residual stream through every layer.",
    attention_only=True,
    fused_heads_suffice=True,
    can_stream=True,
    seq2seq=True,
    cost=cost,
    compute=compute,
)
