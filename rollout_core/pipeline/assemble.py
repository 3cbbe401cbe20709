"""Assembling explanations: a BatchResult sample -> `Explanation`, with its settings."""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np
import torch

from rollout_core.explanation import Explanation
from rollout_core.inputs.text import EncodedText
from rollout_core.models.handle import ModelHandle
from rollout_core.options import Options
from rollout_core.pipeline.batch import BatchResult
from rollout_core.pipeline.heads import ZERO_SHOT_TEMPERATURE


def text_explanation(
    handle: ModelHandle, enc: EncodedText, result: BatchResult, b: int, opts: Options, limit: int,
    labels: Sequence[str] | None,
) -> Explanation:
    n = len(enc.input_ids)
    extra = {"num_tokens": n, "max_length": limit, "labels": None if labels is None else list(labels)}
    if labels is not None:
        extra["zero_shot_temperature"] = ZERO_SHOT_TEMPERATURE
    return Explanation(
        kind="text", method=opts.method, model_name=handle.name, tokens=list(enc.tokens),
        special=np.array(enc.special, dtype=bool), **result.arrays(b, n),
        settings=settings(handle, opts, result, b, extra), target_description=result.descriptions[b],
        prediction=result.predictions[b], target=result.targets[b], text=enc.text, offsets=list(enc.offsets),
        truncation=enc.truncation,
    )


def settings(handle: ModelHandle, opts: Options, result: BatchResult, b: int, extra: dict[str, Any]) -> dict[str, Any]:
    import transformers

    return {
        "model": handle.name, "source": handle.source, "family": handle.family, "task": handle.task,
        "method": opts.method, "head_fusion": opts.head_fusion, "residual_weight": opts.residual_weight,
        "discard_ratio": opts.discard_ratio, "start_layer": opts.start_layer, "end_layer": opts.end_layer,
        "keep_heads": opts.keep_heads, "capture": result.capture, "target": result.targets[b],
        "model_layers": handle.num_layers, "model_heads": handle.num_heads, "device": str(handle.device),
        **extra,
        "versions": {"torch": torch.__version__, "transformers": transformers.__version__,
                     "numpy": np.__version__},
    }


def processed_image(pixels: torch.Tensor, processor: Any) -> np.ndarray:
    """(3, H, W) model input -> (H, W, 3) uint8 RGB as the model saw it (normalisation and rescaling undone)."""
    x = pixels.detach().to("cpu", torch.float64)
    if getattr(processor, "do_normalize", False):
        mean = torch.as_tensor(processor.image_mean, dtype=torch.float64).view(-1, 1, 1)
        std = torch.as_tensor(processor.image_std, dtype=torch.float64).view(-1, 1, 1)
        x = x * std + mean
    if getattr(processor, "do_rescale", False):
        x = x / float(processor.rescale_factor)
    return x.permute(1, 2, 0).round().clamp(0, 255).to(torch.uint8).numpy()
