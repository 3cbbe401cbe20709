"""Attention rollout (Abnar & Zuidema 2020): the product of residual-augmented, head-fused attention."""
from rollout_core.methods._rows import rolled_out
from rollout_core.methods._cost import forward_seconds, product_seconds, rows_seconds
from rollout_core.methods._spec import MethodInput, MethodOutput, MethodSpec, Workload


def compute(method_input: MethodInput) -> MethodOutput:
    """Rollout after each layer of the range: the layers' head-fused attention (the slider's per-layer view)
    rolled out; the explained rows only (the final matrix when it is read)."""
    from rollout_core.maths.rollout import fused_layers

    o = method_input.options
    layers = method_input.captured.maths_attentions[o.start_layer:o.end_layer]
    fused = fused_layers(layers, head_fusion=o.head_fusion, attention_mask=method_input.mask)
    return rolled_out(fused, method_input, residual_weight=o.residual_weight, fused_attention=True)


def cost(w: Workload) -> float:
    """One forward pass and the explained rows; the final product only when discarding (`rolled_out` computes it
    then; otherwise it is deferred to its first reader)."""
    return forward_seconds(w) + rows_seconds(w) + (product_seconds(w) if w.discard else 0.0)


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
