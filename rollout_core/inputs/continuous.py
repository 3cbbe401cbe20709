"""One input as a continuous tensor the model reads: what the faithfulness measures perturb and what the gradient
attributions (gradient x input, integrated gradients) differentiate.

A `PreparedInput` holds the input `x` as the model sees it after its only discrete step (text: the word
embeddings of the tokens; images: the normalised pixels), a `baseline` of the same shape (what a removed
position looks like), and `owner`: which position (token / patch) each feature of `x` belongs to.
Removing a set of positions = taking the baseline's features there. The same tensors serve the
perturbation curves (keep masks -> probabilities, batched) and the gradient attributions (d logit / d x,
pooled back to positions), so both see exactly the same "removal".

Baselines (documented choices; the first of `BASELINES` is the default, the others are what a single input's
evaluation falls back to when deleting everything does not move the prediction, `faithfulness.baseline`):
- text: the [MASK] token's embedding (BERT-style models saw [MASK] in pretraining as "a word is missing";
  the sequence length and positions stay the same); tokenizers without a mask token use the pad token. Then the
  pad token's and the unknown token's embeddings. Special tokens are never removed.
- images: the image's mean colour (per channel, in the model's normalised space) over the whole patch:
  no new edges, the global colour statistics are kept; [CLS]/registers have no pixels and stay. Then the image
  blurred (Gaussian, sigma 1/14 of its side: a patch of a 224 px image, shapes lose their corners), then seeded
  Gaussian noise in the normalised space.
"""
from __future__ import annotations

import copy
import inspect
import threading
import weakref
from dataclasses import dataclass
from typing import Any, Callable

import torch

from rollout_core.cancel import checkpoint
from rollout_core.errors import InputError
from rollout_core import settings
from rollout_core.inputs.text import encode_text, model_max_length, normalise_text, pad_token_id
from rollout_core.models import families
from rollout_core.models.handle import ModelHandle

MAX_BATCH = 64
"""The largest batch a caller that needs a fixed one (the integrated-gradient steps) runs at once."""
SCORING_ATTENTION = "sdpa"
"""Attention kernel of the scoring copy: no attention weights are read there, so the fused kernel serves (about 2x
faster than eager on CPU, equal to it within float rounding)."""
_scoring_copies: weakref.WeakKeyDictionary[torch.nn.Module, torch.nn.Module] = weakref.WeakKeyDictionary()
_copy_lock = threading.Lock()

CLASSIFIER_TASKS = ("text-classification", "image-classification")
BASELINES = {"text": ("mask", "pad", "unk"), "image": ("mean", "blur", "noise")}
"""What a removed position becomes, per modality, the default first."""
BASELINE_WORDS = {"mask": "the [MASK] token", "pad": "the padding token", "unk": "the unknown-word token",
                  "mean": "the image's mean colour", "blur": "the image blurred", "noise": "random noise"}


@dataclass
class PreparedInput:
    """One input ready for perturbation and attribution; x, baseline, owner share the shape (1, *features)."""

    n: int  # positions the model sees (special ones included)
    removable: torch.Tensor  # (n,) bool: positions that may be perturbed
    x: torch.Tensor  # (1, *features)
    baseline: torch.Tensor  # (1, *features)
    owner: torch.Tensor  # (*features,) long: position of each feature, -1 = none (always kept)
    forward: Callable[[torch.Tensor], torch.Tensor]  # (S, *features) -> logits (S, C), differentiable
    batch_size: int = MAX_BATCH  # perturbed inputs per forward pass (`rows_per_pass` when prepared)
    baseline_name: str = ""  # which of `BASELINES` `baseline` is

    def perturbed(self, keep: torch.Tensor) -> torch.Tensor:
        """(S, n) keep masks -> (S, *features) inputs with the removed positions taken from the baseline."""
        keep = torch.as_tensor(keep, dtype=torch.bool, device=self.x.device)
        padded = torch.cat([keep, torch.ones_like(keep[:, :1])], dim=1)  # column n: features with no owner
        owner = torch.where(self.owner < 0, self.n, self.owner)
        feature_keep = padded[:, owner]
        return torch.where(feature_keep, self.x, self.baseline)

    def probabilities(self, keep: torch.Tensor) -> torch.Tensor:
        """(S, n) keep masks -> (S, C) class probabilities, in batches of `batch_size` (the perturbation scorer)."""
        out = []
        with torch.no_grad():
            for start in range(0, keep.shape[0], self.batch_size):
                checkpoint()  # between batches of perturbation curves: a stopped session stops here
                logits = self.forward(self.perturbed(keep[start : start + self.batch_size]))
                out.append(torch.softmax(logits.float(), dim=-1))
        return torch.cat(out)

    def to_positions(self, features: torch.Tensor) -> torch.Tensor:
        """(*features,) per-feature values -> (n,) sums per position (features without owner dropped)."""
        values = features.reshape(-1).to(torch.float64)
        owner = self.owner.reshape(-1)
        keep = owner >= 0
        return torch.zeros(self.n, dtype=torch.float64, device=values.device).index_add_(0, owner[keep], values[keep])


def require_classifier(handle: ModelHandle) -> None:
    if handle.task not in CLASSIFIER_TASKS:
        raise InputError(
            f"{handle.name} is a {handle.task} model; faithfulness is measured on a classifier's predicted "
            "class probability (choose a text or image classification model, e.g. default-text or default-image)"
        )


def rows_per_pass(config: Any, n: int) -> int:
    """Perturbed inputs of `n` positions one forward pass of the scoring copy may take: as many as the activations
    of one layer fit in the memory budget (env ROLLOUT_MEMORY_BUDGET_MB). Per row, float32: the hidden state and
    its three projections, the feed-forward's inner layer and one head's n x n scores per head (an upper bound:
    the fused kernel keeps less). A sentence's or an image's every perturbation of every method fits in one pass."""
    hidden = int(getattr(config, "hidden_size", 768))
    inner = getattr(config, "intermediate_size", None) or int(hidden * getattr(config, "mlp_ratio", 4))
    heads = int(getattr(config, "num_attention_heads", 12))
    row_bytes = 4 * n * (4 * hidden + int(inner) + heads * n)
    return max(1, int(settings.number("ROLLOUT_MEMORY_BUDGET_MB") * 2**20) // row_bytes)


def scoring_model(model: torch.nn.Module) -> torch.nn.Module:
    """`model` with the SCORING_ATTENTION kernel: a copy sharing every parameter and buffer (no new weights), made
    once per model, without the hooks a capture in progress (in another thread) may hold on the model; the model
    itself (eager, as the explanations need it) when the family has no such kernel."""
    if getattr(model.config, "_attn_implementation", None) == SCORING_ATTENTION:
        return model
    with _copy_lock:
        if model not in _scoring_copies:
            shared = {id(t): t for t in (*model.parameters(), *model.buffers())}
            fast = copy.deepcopy(model, shared)
            for module in fast.modules():  # another thread's capture may hold hooks on the model right now
                module._forward_hooks.clear()
                module._forward_pre_hooks.clear()
            try:
                fast.set_attn_implementation(SCORING_ATTENTION)
            except (ValueError, ImportError, AttributeError):
                return model
            _scoring_copies[model] = fast
        return _scoring_copies[model]


def _model(handle: ModelHandle, batch_size: int | None) -> torch.nn.Module:
    """The scoring copy, or with batch_size 1 the model as loaded (the one-input-per-forward reference path)."""
    return handle.model if batch_size == 1 else scoring_model(handle.model)


def prepare_text(handle: ModelHandle, text: str, batch_size: int | None = None,
                 baseline: str = "mask") -> PreparedInput:
    """The text tokenised exactly like `explain_text`, as word embeddings with a [MASK]-embedding baseline (or
    another of `BASELINES["text"]`). `batch_size`: perturbed inputs per forward (None: `rows_per_pass`; 1: one per
    forward on the model as loaded, the reference path)."""
    require_classifier(handle)
    tok = handle.processor
    limit = model_max_length(tok, handle.config, families.spec_for(handle.config).position_offset)
    enc = encode_text(tok, normalise_text(text), limit)
    token_types = None if enc.token_type_ids is None else torch.tensor(enc.token_type_ids, device=handle.device)
    return encoded_text(handle, torch.tensor(enc.input_ids, device=handle.device),
                        torch.tensor(enc.special, dtype=torch.bool, device=handle.device), token_types, batch_size,
                        baseline)


def encoded_text(handle: ModelHandle, ids: torch.Tensor, special: torch.Tensor, token_types: torch.Tensor | None,
                 batch_size: int | None = None, baseline: str = "mask") -> PreparedInput:
    """One tokenised text, (n,) ids, special flags and token types (or None), as `prepare_text` prepares it."""
    model = _model(handle, batch_size)
    ids = ids[None]
    replacement = _replacement(handle.processor, baseline)
    embed = handle.model.get_input_embeddings()
    with torch.no_grad():
        x = embed(ids)
        removed = torch.where(special[None, :, None], x, embed(torch.full_like(ids, int(replacement))))
    n, d = x.shape[1], x.shape[2]
    extra = {} if token_types is None else {"token_type_ids": token_types[None]}

    def forward(batch: torch.Tensor) -> torch.Tensor:
        size = batch.shape[0]
        kwargs = {k: v.expand(size, -1) for k, v in extra.items()}
        mask = torch.ones(size, n, dtype=torch.long, device=batch.device)
        return model(inputs_embeds=batch, attention_mask=mask, **kwargs).logits

    owner = torch.arange(n, device=handle.device)[:, None].expand(n, d)
    return PreparedInput(n, ~special, x, removed, owner, forward, _rows(handle, n, batch_size), baseline)


def prepare_image(handle: ModelHandle, image: Any, batch_size: int | None = None,
                  baseline: str = "mean") -> PreparedInput:
    """The image processed exactly like `explain_image`, as pixels with a mean-colour baseline per patch (or
    another of `BASELINES["image"]`; `batch_size` as for `prepare_text`)."""
    from rollout_core.inputs.images import load_image, model_pixels

    require_classifier(handle)
    return processed_image(handle, model_pixels(handle.processor, load_image(image)).to(handle.device), batch_size,
                           baseline)


def processed_image(handle: ModelHandle, pixels: torch.Tensor, batch_size: int | None = None,
                    baseline: str = "mean") -> PreparedInput:
    """One processed image, (1, C, H, W) pixels as the model reads them, as `prepare_image` prepares it."""
    model = _model(handle, batch_size)
    _, channels, height, width = pixels.shape
    layout = families.image_layout(handle.config, height, width)
    rows, cols = layout.grid
    ph, pw = height // rows, width // cols
    patch = layout.patch_positions.to(handle.device).view(rows, cols)
    owner = torch.full((height, width), -1, dtype=torch.long, device=handle.device)
    owner[: rows * ph, : cols * pw] = patch.repeat_interleave(ph, 0).repeat_interleave(pw, 1)
    owner = owner.expand(channels, height, width)
    removed = _image_baseline(pixels, baseline)
    removable = torch.zeros(layout.num_tokens, dtype=torch.bool, device=handle.device)
    removable[patch.flatten()] = True
    size = getattr(handle.config, "image_size", None)
    resized = isinstance(size, int) and (height, width) != (size, size)
    accepts = "interpolate_pos_encoding" in inspect.signature(handle.model.forward).parameters
    interpolate = {"interpolate_pos_encoding": True} if resized and accepts else {}

    def forward(batch: torch.Tensor) -> torch.Tensor:
        return model(pixel_values=batch, **interpolate).logits

    return PreparedInput(layout.num_tokens, removable, pixels, removed, owner, forward,
                         _rows(handle, layout.num_tokens, batch_size), baseline)


def _replacement(tok: Any, baseline: str) -> int:
    """The token id a removed word becomes: [MASK] (the pad token without one), padding or unknown."""
    if baseline not in BASELINES["text"]:
        raise InputError(f"unknown text baseline {baseline!r}; choose one of {', '.join(BASELINES['text'])}")
    found = None if baseline == "pad" else getattr(tok, f"{baseline}_token_id", None)
    return int(pad_token_id(tok) if found is None else found)


def _image_baseline(pixels: torch.Tensor, baseline: str) -> torch.Tensor:
    """(1, C, H, W) what removed pixels become: the mean colour, the image blurred, or seeded noise."""
    if baseline == "mean":
        return pixels.mean(dim=(2, 3), keepdim=True).expand_as(pixels)
    if baseline == "blur":
        sigma = max(pixels.shape[-2:]) / 14
        radius = int(3 * sigma)
        steps = torch.arange(-radius, radius + 1, dtype=pixels.dtype, device=pixels.device)
        kernel = torch.exp(-steps**2 / (2 * sigma**2))
        kernel = kernel / kernel.sum()
        channels = pixels.shape[1]
        padded = torch.nn.functional.pad(pixels, (radius,) * 4, mode="replicate")
        rows = torch.nn.functional.conv2d(padded, kernel.view(1, 1, 1, -1).repeat(channels, 1, 1, 1), groups=channels)
        return torch.nn.functional.conv2d(rows, kernel.view(1, 1, -1, 1).repeat(channels, 1, 1, 1), groups=channels)
    if baseline == "noise":
        generator = torch.Generator().manual_seed(0)
        return torch.randn(pixels.shape, generator=generator, dtype=pixels.dtype).to(pixels.device)
    raise InputError(f"unknown image baseline {baseline!r}; choose one of {', '.join(BASELINES['image'])}")


def _rows(handle: ModelHandle, n: int, batch_size: int | None) -> int:
    return rows_per_pass(handle.config, n) if batch_size is None else max(1, int(batch_size))
