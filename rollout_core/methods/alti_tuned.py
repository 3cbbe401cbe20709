"""ALTI rollout over the fine-tuned blocks: ALTI contributions (Ferrando et al. 2022) rolled out from the first
block the task was trained in: the method's layer range starts there (`first_layer`), so the slider, the
summary and the settings show the tuned blocks only, and the frozen pretrained blocks below are never read.

Why: default-image is DINOv2-small with only its top 2 of 12 blocks fine-tuned. Rolled out through the ten frozen
blocks, ALTI moves the mass from the shape onto its outline and onto clutter edges: on the first 40 test shapes its
top patch is on the shape in 26, on an outline patch (under 50% shape pixels) or next to one in 9, farther off in 5;
rolled out from block 10 it is on the shape in 38.
The tokens entering the first trained block are read as their own patches, as rollout reads its input tokens
(Abnar & Zuidema 2020 roll out from any layer; Chefer et al. 2021's reference code takes a `start_layer`).
The first trained block comes from the model's registry entry (`first_tuned_layer`, from its training record).
A model without one is refused (`requires`), and so is one whose record says every block was trained (first tuned
layer 0, default-text): on either the method would be plain ALTI rollout (`alti`) under another name.
"""
from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from rollout_core.methods._rows import contribution_rollout, layer_recorder
from rollout_core.methods._spec import MethodInput, MethodOutput, MethodSpec, Workload

if TYPE_CHECKING:
    from rollout_core.errors import InputError
    from rollout_core.models.handle import ModelHandle


def first_tuned_layer(handle: "ModelHandle") -> int:
    """The first layer the model's task training changed (0 when nothing says the lower layers were frozen)."""
    from rollout_core.models.registry import lookup

    entry = lookup(handle.name)
    first = entry.first_tuned_layer if entry is not None else None
    return first if first is not None and 0 <= first < handle.num_layers else 0


def _has_tuned_blocks(handle: "ModelHandle") -> "InputError | None":
    """Only a model whose registry entry records frozen blocks below the ones its task training changed: without
    a record, or with every block trained (first tuned layer 0), the method would be `alti` under another name."""
    from rollout_core.errors import InputError
    from rollout_core.models.registry import lookup

    entry = lookup(handle.name)
    first = entry.first_tuned_layer if entry is not None else None
    if first == 0:
        return InputError(f"every block of {handle.name} was fine-tuned (its training record's first tuned layer is "
                          "0), so ALTI rollout over the fine-tuned blocks would be ALTI rollout itself: use alti")
    if first is not None and 0 < first < handle.num_layers:
        return None
    return InputError(f"ALTI rollout over the fine-tuned blocks needs a model whose fine-tuned blocks are recorded "
                      f"(an embedded model trained by the project); {handle.name} has no such record")


def compute(method_input: MethodInput) -> MethodOutput:
    """ALTI of the layers of the range, rolled out; the range starts at the first tuned layer (`first_layer`)."""
    import torch

    from rollout_core.maths.contributions import alti_contributions

    rec, o = method_input.recorded, method_input.options
    span = slice(o.start_layer, o.end_layer)
    tuned = alti_contributions(replace(rec, layers=rec.layers[span], residual=rec.residual[span],
                                       attn_input=rec.attn_input[span], probs=rec.probs[span],
                                       block_out=rec.block_out[span]), method_input.mask)
    below = tuned.new_zeros(1, *tuned.shape[1:]).expand(o.start_layer, *tuned.shape[1:])  # outside the range: unread
    out = contribution_rollout(torch.cat([below, tuned]), method_input, residual_weight=0.0)
    out.extras = {"first_tuned_layer": first_tuned_layer(method_input.handle)}
    return out



def cost(w: Workload) -> float:
    """ALTI's cost over the tuned blocks only (`w.layers`: the range starts at the first tuned block)."""
    from rollout_core.methods import alti

    return alti.cost(w)


METHOD = MethodSpec(
    name="alti_tuned",
    title="ALTI rollout (fine-tuned blocks)",
    phrase="ALTI rollout over the fine-tuned blocks",
    description="ALTI contributions (Ferrando et al. 2022) multiplied through the blocks the model was fine-tuned "
                "in; a frozen pretrained backbone's blocks below are skipped (only models whose training record shows "
                "frozen blocks).",
    use_when="For a model fine-tuned on top of a frozen backbone (default-image): leaves out the frozen blocks' "
             "generic mixing.",
    explains="ALTI rollout through the blocks the model's task training changed only.",
    uses_head_fusion=False,
    uses_residual=False,
    layer_view="ALTI contributions",
    first_layer=first_tuned_layer,
    requires=_has_tuned_blocks,
    recorder=layer_recorder("ALTI rollout"),
    cost=cost,
    compute=compute,
)
