"""The learning-rate schedule the fine-tuning scripts share (train_text, train_image_top)."""
from __future__ import annotations

import torch


def warmup_then_linear_decay(optimizer: torch.optim.Optimizer, steps: int,
                             warmup_fraction: float) -> torch.optim.lr_scheduler.LambdaLR:
    """Linear warmup over the first `warmup_fraction` of `steps` (at least one step), then linear decay to 0."""
    warmup = max(1, int(warmup_fraction * steps))
    return torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda s: min((s + 1) / warmup, max(0.0, (steps - s) / (steps - warmup))))
