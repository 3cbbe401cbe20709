"""Fine-tuned parameters stored as int8 differences from the pretrained ones, merged back at setup.

A fine-tuned matrix W differs from the pretrained W0 by a small D = W - W0. D is stored as int8 with one bfloat16
scale per output row (about max |row| / 127), so the stored file is a quarter of float32 and the rounding error is
at most half a scale step, far below D itself; vectors (biases, LayerNorm) and parameters with no pretrained value
(a new classifier) are stored whole in float32. `merge` rebuilds W0 + D exactly as `quantise` rounded it, and the
training script measures the model through that same rounding, so the merged model is the measured one.
"""
from __future__ import annotations

import torch

INT8 = ".delta_int8"
SCALE = ".delta_scale"
WHOLE = ".value"


def quantise(trained: dict[str, torch.Tensor], base: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """Stored form of `trained` relative to `base` (keys absent from base are kept whole)."""
    out: dict[str, torch.Tensor] = {}
    for key, value in trained.items():
        value = value.detach().float()
        if key in base and value.ndim == 2:
            delta = value - base[key].float()
            scale = (delta.abs().amax(dim=1, keepdim=True) / 127).clamp_min(1e-12).to(torch.bfloat16)
            out[key + INT8] = torch.round(delta / scale.float()).clamp(-127, 127).to(torch.int8).contiguous()
            out[key + SCALE] = scale.contiguous()
        else:
            out[key + WHOLE] = value.contiguous()
    return out


def compact(stored: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """`stored` with its scales in bfloat16 (runs saved when scales were float32); the int8 values are kept."""
    return {key: value.to(torch.bfloat16) if key.endswith(SCALE) else value for key, value in stored.items()}


def merge(base: dict[str, torch.Tensor], stored: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """The parameters `stored` describes, as float32 tensors keyed like `base` (base itself is not changed)."""
    out: dict[str, torch.Tensor] = {}
    for key, value in stored.items():
        if key.endswith(WHOLE):
            out[key[:-len(WHOLE)]] = value.float()
        elif key.endswith(INT8):
            name = key[:-len(INT8)]
            if name not in base:
                raise KeyError(f"stored difference for {name!r}, which the base model lacks")
            out[name] = base[name].float() + value.float() * stored[name + SCALE].float()
        elif not key.endswith(SCALE):
            raise KeyError(f"unknown stored parameter {key!r}")
    return out
