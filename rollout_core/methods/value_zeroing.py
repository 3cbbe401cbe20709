"""Value-zeroing rollout (Mohebbi et al. 2023): how much each layer's output changes when token j's value is zeroed."""
from __future__ import annotations

from contextlib import contextmanager
from typing import TYPE_CHECKING

from rollout_core.methods._rows import contribution_method, readable_layers
from rollout_core.methods._cost import LAYER_OVERHEAD_SECONDS, forward_seconds, matmul_seconds
from rollout_core.methods._spec import MethodInput, MethodSpec, Workload

if TYPE_CHECKING:
    import torch


def _contributions(method_input: MethodInput) -> torch.Tensor:
    """Value-zeroing scores per layer, rolled out without an added residual (the re-run layer keeps its residual;
    hmohebbi/ValueZeroing rolls out with res=False)."""
    from rollout_core.maths.value_zeroing import value_zeroing_contributions

    return value_zeroing_contributions(method_input.handle.model, method_input.captured.outputs.hidden_states,
                                       method_input.mask)


@contextmanager
def _supported(model):
    """Fails before the forward pass on a family whose layers cannot be re-run one by one."""
    from rollout_core.models.layer_access import layer_access

    yield layer_access(model, "Value-zeroing rollout")



ZEROED_SHARE = 1.8
"""One zeroed token's re-run of a layer, in units of that layer's share of a forward pass's products (measured)."""
CHUNK = 64
"""Zeroed copies per block call (maths.value_zeroing's `chunk`): the per-layer overhead is paid once per chunk."""


def cost(w: Workload) -> float:
    """The forward pass, then every layer re-run once per token with that token's values zeroed, in chunks."""
    chunks = -(-w.tokens // CHUNK)
    return (forward_seconds(w) + w.batch * ZEROED_SHARE * w.tokens * matmul_seconds(w)
            + w.batch * chunks * w.model_layers * LAYER_OVERHEAD_SECONDS)


METHOD = MethodSpec(
    name="value_zeroing",
    title="Value-zeroing rollout",
    phrase="value-zeroing rollout",
    description="Re-runs each layer with one token's value vectors set to zero and takes the cosine distance of "
                "every output from the original (Mohebbi et al. 2023), then multiplies these scores through the "
                "layers.",
    use_when="To measure each token's effect by removing it layer by layer rather than reading weights; one re-run of "
             "each layer per token.",
    explains="How much each layer's output changes when an input's value vectors are zeroed, rolled out.",
    needs_hidden_states=True,
    uses_head_fusion=False,
    uses_residual=False,
    layer_view="value-zeroing scores",
    recorder=_supported,
    requires=readable_layers("Value-zeroing rollout"),
    cost=cost,
    compute=contribution_method(_contributions, add_residual=False),
)
