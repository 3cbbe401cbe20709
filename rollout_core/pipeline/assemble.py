"""Assembling explanations: a BatchResult sample -> `Explanation`, with its settings."""
from __future__ import annotations

import dataclasses
import functools
from typing import Any, Sequence

import numpy as np
import torch

from rollout_core import methods
from rollout_core.explanation import Explanation
from rollout_core.inputs.text import EncodedText
from rollout_core.models import domain, families
from rollout_core.models.handle import ModelHandle
from rollout_core.options import Options
from rollout_core.pipeline.batch import BatchResult
from rollout_core.pipeline.facts import handle_facts
from rollout_core.pipeline.heads import ZERO_SHOT_TEMPERATURE
from rollout_core.reliability.image import image_notes
from rollout_core.reliability.text import model_limits, text_notes


def text_explanation(
    handle: ModelHandle, enc: EncodedText, result: BatchResult, b: int, opts: Options, limit: int,
    labels: Sequence[str] | None,
) -> Explanation:
    """Sample b of a text batch, cropped to its own tokens."""
    n = len(enc.input_ids)
    extra = {"num_tokens": n, "max_length": limit, "labels": None if labels is None else list(labels)}
    if labels is not None:
        extra["zero_shot_temperature"] = ZERO_SHOT_TEMPERATURE
    top = result.predictions[b][0] if result.predictions[b] else None
    facts = handle_facts(handle)
    words = [i for i, s in zip(enc.input_ids, enc.special) if not s]
    warnings = text_notes(len(words), 0 if facts.unk_id is None else words.count(facts.unk_id),
                          unknown_token=facts.unk_token,
                          label=None if top is None else top.label,
                          probability=None if top is None else top.probability,
                          truncation=enc.truncation, text=enc.text, **model_limits(handle.model.config))
    return Explanation(
        kind="text", method=opts.method, model_name=handle.name, tokens=list(enc.tokens),
        special=np.array(enc.special, dtype=bool), **result.arrays(b, n),
        settings=settings(handle, opts, result, b, extra), target_description=result.descriptions[b],
        prediction=result.predictions[b], target=result.targets[b], text=enc.text, offsets=list(enc.offsets),
        truncation=enc.truncation, warnings=warnings + _method_notes(result),
    )


def image_explanation(
    handle: ModelHandle, layout: families.ImageLayout, pixels: torch.Tensor, source_size: tuple[int, int],
    result: BatchResult, opts: Options,
) -> Explanation:
    """The one sample of an image batch; `pixels` (3, H, W) is the model input, `source_size` the upload's."""
    special = np.ones(layout.num_tokens, dtype=bool)
    special[layout.patch_positions.numpy()] = False
    extra = {"image_size": [int(pixels.shape[-2]), int(pixels.shape[-1])], "grid": list(layout.grid),
             "source_size": list(source_size), "center_crop": bool(getattr(handle.processor, "do_center_crop", False))}
    image = processed_image(pixels, handle.processor)
    return Explanation(
        kind="image", method=opts.method, model_name=handle.name, tokens=layout.tokens(), special=special,
        **result.arrays(0, layout.num_tokens), settings=settings(handle, opts, result, 0, extra),
        target_description=result.descriptions[0], prediction=result.predictions[0], target=result.targets[0],
        grid=layout.grid, patch_positions=layout.patch_positions.numpy(), image=image,
        warnings=_image_warnings(handle, result, image) + _method_notes(result),
    )


def _method_notes(result: BatchResult) -> tuple[str, ...]:
    """What the method itself says about this result's reliability (MethodOutput.extras["notes"])."""
    return tuple(result.method_facts.get("notes", ()))


def _image_warnings(handle: ModelHandle, result: BatchResult, image: np.ndarray) -> tuple[str, ...]:
    """The out-of-domain notes of a model with domain statistics (none for others)."""
    stats = domain.applicable(handle)
    if stats is None or result.features is None:
        return ()
    top = result.predictions[0][0] if result.predictions[0] else None
    return image_notes(handle.name, dataset=stats.dataset, label=None if top is None else top.label,
                       probability=None if top is None else top.probability,
                       distance=float(stats.distance(result.features[0].numpy())[0]), threshold=stats.threshold,
                       colourfulness=domain.colourfulness(image), grey_below=domain.GREY_BELOW,
                       unsure_below=stats.unsure_below)


def settings(handle: ModelHandle, opts: Options, result: BatchResult, b: int, extra: dict[str, Any]) -> dict[str, Any]:
    """`Explanation.settings`: the model's facts, every field of the Options as they ran (the capture that
    was used, not "auto"), the target, `extra` and the library versions."""
    return {
        "model": handle.name, "source": handle.source, "family": handle.family, "task": handle.task,
        **_option_fields(opts, result.capture), "target": result.targets[b],
        "signed": methods.get(opts.method).signed,
        "model_layers": handle.num_layers, "model_heads": handle.num_heads, "device": str(handle.device),
        **result.method_facts, **extra,
        "versions": dict(_versions()),
    }


@functools.cache
def _versions() -> dict[str, str]:
    """The libraries' versions, read once (transformers' lazy module answers `__version__` slowly)."""
    import transformers

    return {"torch": torch.__version__, "transformers": transformers.__version__, "numpy": np.__version__}


@functools.lru_cache(maxsize=64)
def _option_fields(opts: Options, capture: str) -> dict[str, Any]:
    """Every field of `opts` with the capture that ran, once per Options (asdict showed in a corpus's per-row
    time); the caller copies the scalar values into a dict of its own."""
    return dataclasses.asdict(dataclasses.replace(opts, capture=capture))


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
