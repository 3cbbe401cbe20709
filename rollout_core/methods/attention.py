"""Raw attention: one layer's head-fused attention on its own, no product through the layers."""
from rollout_core.methods._rows import rows_of
from rollout_core.methods._cost import forward_seconds
from rollout_core.methods._spec import MethodInput, MethodOutput, MethodSpec, Workload


def compute(method_input: MethodInput) -> MethodOutput:
    """Each layer's own head-fused attention."""
    from rollout_core.maths.rollout import layer_attention

    o = method_input.options
    layers = layer_attention(method_input.captured.attentions, head_fusion=o.head_fusion,
                             attention_mask=method_input.mask)[o.start_layer:o.end_layer]
    return rows_of(layers, method_input)



def cost(w: Workload) -> float:
    """One forward pass (each layer's attention is read as it is)."""
    return forward_seconds(w)


METHOD = MethodSpec(
    name="attention",
    title="Raw attention (last layer)",
    phrase="raw attention",
    description="Shows the head-fused attention of a single layer, with no residual and no product over layers.",
    use_when="To inspect what one layer attends to (the slider picks the layer); one layer's view, not an attribution "
             "of the whole model.",
    explains="How strongly the explained output attends to each input in one layer (no product over layers).",
    uses_residual=False,
    uses_discard=False,
    cumulative=False,
    single_layer=True,
    attention_only=True,
    fused_heads_suffice=True,
    seq2seq=True,
    cost=cost,
    compute=compute,
)
