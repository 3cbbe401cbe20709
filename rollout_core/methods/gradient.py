"""Gradient-weighted rollout (Chefer et al. 2021): heads weighted by the gradient of the explained score."""
from rollout_core.methods._spec import MethodSpec

METHOD = MethodSpec(
    name="gradient",
    title="Gradient-weighted rollout",
    phrase="gradient-weighted rollout (class-specific)",
    description="Weights each head's attention by the positive part of its gradient for the explained class, then rolls out.",
    order=2,
    class_specific=True,
    needs_gradients=True,
    uses_head_fusion=False,
    uses_residual=False,
)
