"""Raw attention: one layer's head-fused attention on its own, no product through the layers."""
from rollout_core.methods._spec import MethodSpec

METHOD = MethodSpec(
    name="attention",
    title="Raw attention (last layer)",
    phrase="raw attention",
    description="Shows the head-fused attention of a single layer, with no residual and no product over layers.",
    order=3,
    uses_residual=False,
    cumulative=False,
    seq2seq=True,
)
