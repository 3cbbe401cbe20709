"""Sink-free rollout: attention rollout with each layer's attention sinks (rollout_core.maths.sinks) dropped."""
from rollout_core.methods._rows import rows_of
from rollout_core.methods._cost import forward_seconds, product_seconds
from rollout_core.methods._spec import MethodInput, MethodOutput, MethodSpec, Workload


def compute(method_input: MethodInput) -> MethodOutput:
    """Sinks found per layer and sample (received attention >= 5x uniform and, where value norms were recorded, a
    value norm below 0.6x the layer's median). Their columns are removed before the residual is added and rows
    renormalised, then the usual product. That includes the explained [CLS] when it is a sink (default-text's
    [CLS] takes 8-9x uniform attention with a value norm under 0.1x the median in layers 2-5): its row keeps its
    residual and the attention it pays to the other tokens, which is what rollout must follow."""
    from rollout_core.maths.sinks import find_sinks, sink_free_rollout

    o, atts = method_input.options, method_input.captured.attentions
    report = find_sinks(atts, method_input.recorded.norms, method_input.mask, head_fusion=o.head_fusion)
    cumulative = sink_free_rollout(atts, report.sinks, head_fusion=o.head_fusion, residual_weight=o.residual_weight,
                                   discard_ratio=o.discard_ratio, start_layer=o.start_layer, end_layer=o.end_layer,
                                   attention_mask=method_input.mask, all_layers=True)
    return rows_of(cumulative, method_input)


def _recorder(model):
    from rollout_core.models.value_norms import record_value_norms

    return record_value_norms(model)



def cost(w: Workload) -> float:
    """One forward pass (value norms recorded on the way) and rollout's product."""
    return forward_seconds(w) + product_seconds(w)


METHOD = MethodSpec(
    name="sink_free",
    title="Sink-free rollout",
    phrase="sink-free attention rollout",
    description="Attention rollout with attention sinks (tokens that take far more attention than uniform but "
                "carry small values, such as DINOv2's first-layer sink patch) removed layer by layer.",
    use_when="When attention sinks (tokens that take much attention but carry little) swamp plain rollout, as [CLS] "
             "does in default-text's middle layers.",
    explains="Attention rollout's shares with the attention paid to attention sinks removed layer by layer.",
    attention_only=True,
    fused_heads_suffice=True,
    summary_note="Sink-free rollout drops the attention paid to them, layer by layer (each keeps its own residual).",
    recorder=_recorder,
    cost=cost,
    compute=compute,
)
