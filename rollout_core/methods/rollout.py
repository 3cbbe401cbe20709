"""Attention rollout (Abnar & Zuidema 2020): the product of residual-augmented, head-fused attention."""
from rollout_core.methods._spec import MethodSpec

METHOD = MethodSpec(
    name="rollout",
    title="Attention rollout",
    phrase="attention rollout",
    description="Multiplies each layer's head-fused attention, mixed with the residual identity, through the layers.",
    order=0,
    can_stream=True,
    seq2seq=True,
)
