"""Per-family facts, kept in one table: which positions are special, which row is explained, the patch
grid, and which architectures rollout cannot explain.

Special text positions come from the tokenizer (its special-tokens mask) and the padding mask, so any
tokenizer works. Images: a family says how many tokens precede the patches (CLS; DeiT's distillation
token at index 1; DINOv2 register tokens after CLS, counted from the config). The explained row is the
row whose information the prediction reads: the pooling of the model's head.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from rollout_core.errors import UnsupportedModelError

TASK_MODALITY = {
    "text-classification": "text", "text-encoder": "text", "sentence-encoder": "text", "causal-lm": "text",
    "seq2seq": "text", "image-classification": "image", "image-backbone": "image",
}


@dataclass(frozen=True)
class FamilySpec:
    """What rollout needs to know about one model family."""

    modality: str  # "text" | "image"
    prefix_names: tuple[str, ...] = ("[CLS]",)  # image: tokens before the patches (and registers)
    register_attr: str | None = None  # image: config attribute counting register tokens (inserted after CLS)
    causal: bool = False  # decoder-only language model (causal self-attention)
    head_pooling: str = "first"  # rows the classification head reads: see POOLINGS
    mean_pooling_attr: str | None = None  # config flag switching the head to "patch-mean" (BEiT)
    position_offset: int = 0  # position embeddings reserved before the first token (RoBERTa: padding_idx + 1)
    unsupported: str | None = None  # why rollout is refused for this family


POOLINGS = {
    "first": "row of the first token",
    "last": "row of the last real token",
    "mean": "mean of the rows of the real tokens",
    "prefix-mean": "mean of the [CLS] and distillation rows",
    "patch-mean": "mean of the patch rows",
    "first+patch-mean": "[CLS] row and mean of the patch rows, half each",
}

_WINDOWED = (
    "{name} computes attention inside local windows (shifted between layers), so there is no global token-to-token "
    "attention matrix to roll out; choose a ViT, DeiT, BEiT or DINOv2 model"
)
_NO_ATTENTION = "{name} has no self-attention layers, so there is no attention to roll out"
_CHANGING_LENGTH = (
    "{name} changes the number of tokens between layers (pooling or spatial reduction), so the layers' attention "
    "matrices cannot be multiplied; choose a model that keeps one token per position"
)
_LOCAL = "{name} uses local or sparse attention patterns, so most token pairs have no attention to roll out"

_TEXT = FamilySpec("text")
_ROBERTA = FamilySpec("text", position_offset=2)
_DECODER = FamilySpec("text", causal=True, head_pooling="last")

FAMILIES: dict[str, FamilySpec] = {
    **{k: _TEXT for k in ("bert", "distilbert", "albert", "electra", "deberta", "deberta-v2", "t5", "mt5",
                          "bart", "mbart", "pegasus", "marian", "modernbert")},
    **{k: _ROBERTA for k in ("roberta", "xlm-roberta", "camembert", "mpnet")},
    **{k: _DECODER for k in ("gpt2", "llama", "mistral", "qwen2", "qwen3", "gemma", "gemma2", "phi", "phi3",
                             "gpt_neox", "gptj", "gpt_neo")},
    "opt": FamilySpec("text", causal=True, head_pooling="last", position_offset=2),
    "vit": FamilySpec("image"),
    "deit": FamilySpec("image", prefix_names=("[CLS]", "[DIST]")),
    "beit": FamilySpec("image", mean_pooling_attr="use_mean_pooling"),
    "data2vec-vision": FamilySpec("image", mean_pooling_attr="use_mean_pooling"),
    "dinov2": FamilySpec("image", head_pooling="first+patch-mean"),
    "dinov2_with_registers": FamilySpec("image", register_attr="num_register_tokens", head_pooling="first+patch-mean"),
    **{k: FamilySpec("image", unsupported=_WINDOWED) for k in ("swin", "swinv2", "donut-swin", "maskformer-swin",
                                                               "swin2sr")},
    **{k: FamilySpec("image", unsupported=_LOCAL) for k in ("nat", "dinat")},
    **{k: FamilySpec("image", unsupported=_CHANGING_LENGTH) for k in ("pvt", "pvt_v2", "segformer", "levit",
                                                                      "mobilevit", "mobilevitv2", "cvt")},
    **{k: FamilySpec("image", unsupported=_NO_ATTENTION) for k in ("resnet", "convnext", "convnextv2",
                                                                   "regnet", "efficientnet", "mobilenet_v2",
                                                                   "poolformer", "van")},
    **{k: FamilySpec("text", unsupported=_LOCAL) for k in ("longformer", "led", "big_bird", "reformer")},
    "funnel": FamilySpec("text", unsupported=_CHANGING_LENGTH),
    **{k: FamilySpec("text", unsupported=_NO_ATTENTION) for k in ("mamba", "mamba2", "rwkv")},
}


def spec_for(config: Any) -> FamilySpec:
    """The family's spec; for families not in the table, one inferred from the config."""
    model_type = getattr(config, "model_type", "")
    if model_type in FAMILIES:
        return FAMILIES[model_type]
    from transformers.models.auto import modeling_auto as auto

    image = model_type in auto.MODEL_FOR_IMAGE_MAPPING_NAMES or hasattr(config, "patch_size")
    if image:
        windowed = hasattr(config, "window_size")
        return FamilySpec("image", unsupported=_WINDOWED if windowed else None)
    causal = (
        model_type in auto.MODEL_FOR_CAUSAL_LM_MAPPING_NAMES
        and model_type not in auto.MODEL_FOR_MASKED_LM_MAPPING_NAMES
        and not getattr(config, "is_encoder_decoder", False)
    )
    return _DECODER if causal else _TEXT


def check_supported(config: Any) -> FamilySpec:
    """The spec, or `UnsupportedModelError` saying why rollout cannot explain this model."""
    spec = spec_for(config)
    name = f"This model ({getattr(config, 'model_type', 'unknown')})"
    if spec.unsupported:
        raise UnsupportedModelError(spec.unsupported.format(name=name))
    try:
        layer_and_head_counts(config)
    except UnsupportedModelError:
        raise UnsupportedModelError(_NO_ATTENTION.format(name=name)) from None
    return spec


def layer_and_head_counts(config: Any) -> tuple[int, int]:
    """(self-attention layers, heads) of the model; the encoder's for encoder-decoder models."""
    layers = _first_int(config, "encoder_layers", "num_hidden_layers", "n_layer", "num_layers")
    heads = _first_int(config, "encoder_attention_heads", "num_attention_heads", "n_head", "num_heads")
    if layers is None or heads is None:
        raise UnsupportedModelError("the config gives no number of attention layers or heads")
    return layers, heads


def _first_int(config: Any, *names: str) -> int | None:
    for name in names:
        value = getattr(config, name, None)
        if isinstance(value, int) and value > 0:
            return value
    return None


# ----------------------------------------------------------------------------------------------
# Images: the token layout


@dataclass(frozen=True)
class ImageLayout:
    """Token layout of a vision transformer input: prefix tokens, then registers, then patches row-major."""

    prefix_names: tuple[str, ...]  # every non-patch token, in order
    grid: tuple[int, int]  # (rows, cols), rows = image rows

    @property
    def num_tokens(self) -> int:
        return len(self.prefix_names) + self.grid[0] * self.grid[1]

    @property
    def patch_positions(self) -> torch.Tensor:
        start = len(self.prefix_names)
        return torch.arange(start, start + self.grid[0] * self.grid[1])

    def tokens(self) -> list[str]:
        rows, cols = self.grid
        return list(self.prefix_names) + [f"patch {r},{c}" for r in range(rows) for c in range(cols)]


def image_layout(config: Any, pixel_height: int, pixel_width: int) -> ImageLayout:
    """The layout for an input of pixel_height x pixel_width: the patch grid comes from the real size."""
    spec = spec_for(config)
    patch = getattr(config, "patch_size", None)
    ph, pw = (patch, patch) if isinstance(patch, int) else tuple(patch)
    registers = int(getattr(config, spec.register_attr, 0) or 0) if spec.register_attr else 0
    names = spec.prefix_names[:1] + tuple(f"[REG{i}]" for i in range(registers)) + spec.prefix_names[1:]
    return ImageLayout(names, (pixel_height // ph, pixel_width // pw))


# ----------------------------------------------------------------------------------------------
# The explained row


def head_pooling(spec: FamilySpec, config: Any, model: torch.nn.Module, task: str) -> str:
    """Which rows the prediction reads, as a key of POOLINGS (causal LMs: the target position instead)."""
    if task == "sentence-encoder":
        return "mean"
    if task in ("text-encoder", "image-backbone"):
        return "first" if not spec.causal else "last"
    if type(model).__name__.endswith("WithTeacher"):  # DeiT distilled: mean of the CLS and distillation heads
        return "prefix-mean"
    if spec.mean_pooling_attr and getattr(config, spec.mean_pooling_attr, False):
        return "patch-mean"
    return spec.head_pooling


def pooled_positions(handle: Any, tokens: int, patch_positions: torch.Tensor | None = None) -> int:
    """How many of `tokens` positions the readout of `handle`'s model pools (1 for a [CLS] head; every real token for
    mean pooling): the explained rows a cost estimate counts."""
    spec = spec_for(handle.config)
    pooling = head_pooling(spec, handle.config, handle.model, handle.task)
    return int((row_weights(pooling, torch.ones(1, tokens, dtype=torch.bool), patch_positions) > 0).sum())


def row_weights(pooling: str, real: torch.Tensor, patch_positions: torch.Tensor | None = None) -> torch.Tensor:
    """(B, n) weights w with scores = w @ R: the explained row(s) for each sample.

    `real` is (B, n) bool (True = a real, non-padding position). Weights sum to 1 per sample.
    """
    batch, n = real.shape
    weights = torch.zeros(batch, n, dtype=torch.float64, device=real.device)
    if pooling == "first":
        weights.select(1, 0).fill_(1.0)  # fewer torch calls than item assignment
    elif pooling == "last":
        last = real.long().cumsum(-1).argmax(-1)  # index of the last True
        weights[torch.arange(batch), last] = 1.0
    elif pooling == "mean":
        weights = real.double() / real.double().sum(-1, keepdim=True).clamp_min(1.0)
    elif pooling == "prefix-mean":
        weights[:, :2] = 0.5
    elif pooling in ("patch-mean", "first+patch-mean"):
        if patch_positions is None:
            raise ValueError(f"pooling {pooling!r} needs patch positions")
        weights[:, patch_positions] = 1.0 / len(patch_positions)
        if pooling == "first+patch-mean":
            weights = weights * 0.5
            weights[:, 0] = 0.5
    else:
        raise ValueError(f"unknown pooling {pooling!r}")
    return weights
