"""Attention flow (Abnar & Zuidema 2020): the max flow from an output to each input through the layer graph."""
from rollout_core.methods._spec import MethodSpec

METHOD = MethodSpec(
    name="flow",
    title="Attention flow",
    phrase="attention flow",
    description="Treats the residual-augmented attention of every layer as edge capacities and takes the maximum flow.",
    order=1,
)
