"""The explain pipeline behind `rollout_core.explain`, one job per module.

heads.py      what the model predicts, which class or position is explained, the score for gradients
batch.py      the per-batch core: capture (full or streaming), the method, the explained rows
seq2seq.py    encoder-decoder models: generation, decoder-to-source attention
assemble.py   BatchResult -> Explanation (settings, processed image)
"""
from __future__ import annotations

import torch


def to_device(batch: dict[str, torch.Tensor], device: torch.device) -> dict[str, torch.Tensor]:
    """Every tensor of a tokenizer batch moved to `device`."""
    return {k: v if v.device == device else v.to(device) for k, v in batch.items()}
