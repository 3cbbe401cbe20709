"""What the gradient attributions (gradient x input, integrated gradients) share: each sample of an explained
batch as the continuous input the model reads (rollout_core.inputs.continuous: word embeddings with a [MASK]
baseline, pixels with a mean-colour baseline, exactly as the faithfulness evaluation prepares it), attributed to
its explained class and pooled to positions."""
from __future__ import annotations

from typing import TYPE_CHECKING, Callable

from rollout_core.methods._spec import MethodInput

if TYPE_CHECKING:
    import torch

    from rollout_core.inputs.continuous import PreparedInput


GRADIENT_ATTRIBUTION = dict(class_specific=True, signed=True, needs_classes=True, uses_head_fusion=False,
                            uses_residual=False, uses_discard=False, cumulative=False, layered=False)
"""The MethodSpec facts the gradient attributions share: one signed map of a classifier's class for the whole model,
read from no attention (so no head fusion, residual, discard or layer range)."""


def per_position(method_input: MethodInput,
                 attribute: "Callable[[PreparedInput, int], torch.Tensor]") -> "torch.Tensor":
    """(B, n) `attribute(prepared, target)` of every sample, (n_b,) each, padded with zeros to the batch's n.
    Padding sits at the end of a row (as the text encoder pads); [UNK] is an ordinary token here, as in
    `encode_text`'s special flags."""
    import torch

    from rollout_core.inputs.continuous import encoded_text, processed_image

    m = method_input
    if "pixel_values" in m.inputs:
        pixels = m.inputs["pixel_values"]
        return torch.stack([attribute(processed_image(m.handle, pixels[b:b + 1]), int(m.target_index[b]))
                            for b in range(pixels.shape[0])])
    ids, types = m.inputs["input_ids"], m.inputs.get("token_type_ids")
    tok = m.handle.processor
    special_ids = [i for i in tok.all_special_ids if i != getattr(tok, "unk_token_id", None)]
    special = torch.isin(ids, torch.tensor(special_ids, device=ids.device))
    lengths = [ids.shape[1]] * ids.shape[0] if m.mask is None else m.mask.sum(-1).tolist()
    rows = []
    for b, n in enumerate(int(length) for length in lengths):
        prepared = encoded_text(m.handle, ids[b, :n], special[b, :n], None if types is None else types[b, :n])
        rows.append(torch.nn.functional.pad(attribute(prepared, int(m.target_index[b])), (0, ids.shape[1] - n)))
    return torch.stack(rows)
