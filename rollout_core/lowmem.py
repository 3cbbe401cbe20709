"""Low-memory rollout: fuse heads and multiply the rollout inside the forward pass.

`output_attentions=True` keeps every layer's (heads, n, n) probabilities until the forward ends:
24 layers x 16 heads x 4096² fp32 is 25 GB. Here each layer's probabilities are computed in blocks
of query rows, fused over heads at once and folded into the running rollout R = Ã_l · R, so the
extra memory is a few (B, n, n) matrices (R, the fused layer, the product) plus the explained rows
after each layer, whatever the number of layers or heads.

Two paths, chosen per model family:
- Attention interface (every transformers 5 family whose attention calls
  `ALL_ATTENTION_FUNCTIONS.get_interface(...)`: BERT, RoBERTa, DistilBERT, ALBERT, ELECTRA, GPT-2,
  Llama, Mistral, Qwen2, Gemma, ViT, DeiT, BEiT, DINOv2, CLIP, T5 encoder, ...): an attention
  implementation "rollout_stream" is registered for the duration of the call and the model's config
  points at it. The layer output still comes from PyTorch's fused SDPA kernel (transformers' own
  `sdpa_attention_forward`); the probabilities are computed beside it, block by block. Families
  with logit soft-capping (Gemma 2), which SDPA cannot do, get their output from the same blocks.
- Forward hooks (families that compute attention inline: DeBERTa, MPNet, ...): the model runs
  eagerly with `output_attentions=True`; a hook on each innermost attention module takes that
  layer's probabilities, folds them in and hands `None` on, so at most one layer's
  (B, heads, n, n) tensor is alive at a time.

Layers are numbered in the order their attention runs, so a module shared across layers (ALBERT)
counts once per use. The per-layer step is `rollout_core.maths.rollout.augment_layer`, the same
one the plain path uses.
"""
from __future__ import annotations

import contextlib
import contextvars
import functools
import inspect
import sys
import threading
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator, Mapping, Sequence

import torch

from rollout_core.errors import InputError, UnsupportedModelError
from rollout_core.maths.fusion import fuse_heads
from rollout_core.maths.rollout import augment_layer, layer_range
from rollout_core.settings_env import env_number

STREAM_IMPLEMENTATION = "rollout_stream"
"""Name under which the streaming attention function is registered while a capture runs."""

DEFAULT_MEMORY_BUDGET_MB = 2048
"""Budget for the attentions the plain path keeps, when ROLLOUT_MEMORY_BUDGET_MB is not set."""

_INTERFACE_MARK = "ALL_ATTENTION_FUNCTIONS.get_interface("
_UNSUPPORTED_KWARGS = ("s_aux", "sinks")  # attention sinks change the softmax; not reproduced here

_LOCK = threading.RLock()
_ACTIVE: contextvars.ContextVar["_Accumulator | None"] = contextvars.ContextVar("rollout_stream", default=None)


# ----------------------------------------------------------------------------------------------
# Public API


def estimate_full_capture_bytes(
    num_layers: int, num_heads: int, n: int, batch: int = 1, dtype: torch.dtype = torch.float32
) -> int:
    """Bytes that `output_attentions=True` keeps alive: one (batch, heads, n, n) tensor per layer."""
    itemsize = torch.empty((), dtype=dtype).element_size()
    return int(num_layers) * int(num_heads) * int(batch) * int(n) * int(n) * itemsize


def memory_budget_bytes() -> int:
    """Budget above which explain.py switches to streaming: env ROLLOUT_MEMORY_BUDGET_MB (MiB)."""
    megabytes = env_number("ROLLOUT_MEMORY_BUDGET_MB", DEFAULT_MEMORY_BUDGET_MB, minimum=0.0, inclusive=False)
    return max(1, int(megabytes * 2**20))


def uses_attention_interface(model: torch.nn.Module) -> bool:
    """True when the model's attention goes through transformers' AttentionInterface.

    The same test transformers applies before letting an implementation be switched: the module
    defining the model class calls `ALL_ATTENTION_FUNCTIONS.get_interface(`.
    """
    for cls in type(model).__mro__:
        if cls.__module__.startswith("transformers.models.") and cls.__module__ in sys.modules:
            return _module_uses_interface(cls.__module__)
    return False


@functools.lru_cache(maxsize=None)
def _module_uses_interface(name: str) -> bool:
    try:
        return _INTERFACE_MARK in inspect.getsource(sys.modules[name])
    except (OSError, TypeError):
        return False


def streaming_rollout(
    handle: Any,
    inputs: Mapping[str, torch.Tensor],
    *,
    head_fusion: str = "mean",
    residual_weight: float = 1.0,
    discard_ratio: float = 0.0,
    start_layer: int = 0,
    end_layer: int | None = None,
    rows: Sequence[int] | None = None,
) -> dict[str, Any]:
    """Run the model once and return the rollout without keeping per-layer, per-head attentions.

    `handle` is anything with `.model` and `.device` (a ModelHandle). `inputs` are the model's
    keyword inputs (tokenizer or image-processor output); a 2-D "attention_mask" marks padding.
    `rows` are the query positions whose history the layer slider needs (None: all rows, which
    costs L' x n x n again; pass the explained rows).

    Returns {"matrix": (B, n, n) R_end, "layer_rows": (L', B, r, n) rows of R after each layer,
    "layer_attention_rows": (L', B, r, n) rows of each layer's fused attention, "outputs": the
    model output, "logits": outputs.logits or None, "path": "interface" | "hooks",
    "sdpa_layers": layers whose output came from SDPA}, where L' = end_layer - start_layer.
    """
    model: torch.nn.Module = handle.model
    device = torch.device(handle.device)
    config = getattr(model, "config", None)
    if getattr(config, "is_encoder_decoder", False):
        raise UnsupportedModelError(
            "Low-memory capture covers encoders, decoders and vision transformers; "
            "for encoder-decoder models use the standard capture (capture='full')."
        )
    batch = {k: (v.to(device) if isinstance(v, torch.Tensor) else v) for k, v in inputs.items()}
    padding = batch.get("attention_mask")
    padding = padding if isinstance(padding, torch.Tensor) and padding.dim() == 2 else None
    num_layers = getattr(handle, "num_layers", None) or getattr(config, "num_hidden_layers", None)
    if not num_layers:
        raise UnsupportedModelError("Low-memory capture needs the number of layers (config.num_hidden_layers).")
    accumulator = _Accumulator(
        head_fusion=head_fusion,
        residual_weight=float(residual_weight),
        discard_ratio=float(discard_ratio),
        num_layers=int(num_layers),
        layers=layer_range(int(num_layers), start_layer, end_layer),
        rows=None if rows is None else [int(r) for r in rows],
        padding_mask=padding,
    )
    path = "interface" if uses_attention_interface(model) else "hooks"
    runner = _streaming_implementation if path == "interface" else _attention_hooks
    token = _ACTIVE.set(accumulator)
    try:
        with torch.no_grad(), runner(model):
            outputs = model(**batch, output_attentions=path == "hooks")
    finally:
        _ACTIVE.reset(token)
    result = accumulator.result()
    result.update(outputs=outputs, logits=getattr(outputs, "logits", None), path=path)
    return result


# ----------------------------------------------------------------------------------------------
# The accumulator: one per capture, fed one layer at a time


@dataclass
class _Accumulator:
    head_fusion: str
    residual_weight: float
    discard_ratio: float
    num_layers: int
    layers: range  # the layers rolled out, as rollout_core.maths.rollout.layer_range selects them
    rows: list[int] | None
    padding_mask: torch.Tensor | None
    calls: int = 0
    sdpa_layers: int = 0
    rollout: torch.Tensor | None = None
    layer_rows: list[torch.Tensor] = field(default_factory=list)
    layer_attention_rows: list[torch.Tensor] = field(default_factory=list)
    _fused: torch.Tensor | None = None

    def next_layer(self) -> int:
        layer = self.calls
        self.calls += 1
        return layer

    def wants(self, layer: int) -> bool:
        return layer in self.layers

    def add(self, fused: torch.Tensor) -> None:
        """Fold one layer's head-fused attention (B, n, n) into R (float32 or wider)."""
        fused = fused if fused.dtype in (torch.float32, torch.float64) else fused.float()
        n = fused.shape[-1]
        if self.rows is not None and any(not 0 <= r < n for r in self.rows):
            raise InputError(f"Explained rows {self.rows} are outside the {n} positions of the input.")
        self.layer_attention_rows.append(self._raw_rows(fused))
        step = augment_layer(
            fused,
            residual_weight=self.residual_weight,
            discard_ratio=self.discard_ratio,
            attention_mask=self.padding_mask,
        )
        if step.untyped_storage().data_ptr() == fused.untyped_storage().data_ptr():
            step = step.clone()  # the fused buffer is overwritten by the next layer
        # no spare buffer kept for the product: it would sit beside augment_layer's temporaries at the peak
        self.rollout = step if self.rollout is None else torch.matmul(step, self.rollout)
        del step
        self.layer_rows.append(self._rows(self.rollout).clone())

    def fused_buffer(self, batch: int, n: int, dtype: torch.dtype, device: torch.device) -> torch.Tensor:
        """(B, n, n) buffer for one layer's fused attention, reused across layers."""
        buffer = self._fused
        if buffer is None or buffer.shape != (batch, n, n) or buffer.dtype != dtype or buffer.device != device:
            buffer = self._fused = torch.empty(batch, n, n, dtype=dtype, device=device)
        return buffer

    def _raw_rows(self, fused: torch.Tensor) -> torch.Tensor:
        """The explained rows of `layer_attention` (padded rows and columns 0, real rows renormalised),
        computed on those rows only: running layer_attention on the whole (B, n, n) layer would add
        several n x n temporaries to the peak. Tests pin it to layer_attention."""
        rows = self._rows(fused).clamp_min(0.0)
        if self.padding_mask is not None:
            real = (self.padding_mask.to(rows.device) > 0).to(rows.dtype)
            rows = rows * self._rows(real[:, :, None]) * real[:, None, :]
        sums = rows.sum(dim=-1, keepdim=True)
        return torch.where(sums > 0, rows / sums.clamp_min(torch.finfo(rows.dtype).tiny), rows)

    def _rows(self, matrix: torch.Tensor) -> torch.Tensor:
        return matrix if self.rows is None else matrix[:, self.rows, :]

    def result(self) -> dict[str, Any]:
        if self.calls != self.num_layers:
            raise UnsupportedModelError(
                f"The model has {self.num_layers} layers but ran {self.calls} attention calls through the "
                "low-memory capture; use capture='full' for this model."
            )
        return {
            "matrix": self.rollout,
            "layer_rows": torch.stack(self.layer_rows),
            "layer_attention_rows": torch.stack(self.layer_attention_rows),
            "sdpa_layers": self.sdpa_layers,
        }


# ----------------------------------------------------------------------------------------------
# Probabilities in blocks of query rows


def _query_block(batch: int, heads: int, n: int) -> int:
    """Query rows per block so that one block of scores is about a quarter of an (n, n) matrix."""
    return max(1, min(n, n // max(1, 4 * batch * heads)))


def _block_probabilities(
    query: torch.Tensor,
    key: torch.Tensor,
    attention_mask: torch.Tensor | None,
    start: int,
    stop: int,
    *,
    scaling: float | None,
    softcap: float | None,
    position_bias: torch.Tensor | None,
    is_causal: bool,
) -> torch.Tensor:
    """Softmax probabilities (B, H, stop-start, k) of query rows start:stop, in float32 or wider.

    Mirrors transformers' eager attention: scale, soft-cap, add position bias and mask (additive
    float or boolean keep-mask), causal mask when no mask is given, softmax over keys. Grouped
    query attention is done without repeating keys: query heads are grouped under their KV head.
    """
    compute = torch.promote_types(query.dtype, torch.float32)
    batch, heads, _, dim = query.shape
    kv_heads = key.shape[1]
    scale = dim**-0.5 if scaling is None else scaling
    q = query[:, :, start:stop].to(compute)
    k = key.to(compute)
    group = heads // kv_heads
    scores = torch.matmul(q.reshape(batch, kv_heads, group, stop - start, dim), k.unsqueeze(2).transpose(-1, -2))
    scores = scores.reshape(batch, heads, stop - start, key.shape[2]).mul_(scale)  # in place: one block alive
    if softcap is not None:
        scores = scores.div_(softcap).tanh_().mul_(softcap)
    if position_bias is not None:
        scores = scores.add_(_query_rows(position_bias, start, stop).to(compute))
    floor = torch.finfo(compute).min
    if attention_mask is not None:
        block = _query_rows(attention_mask, start, stop)
        scores = scores.masked_fill_(~block, floor) if block.dtype == torch.bool else scores.add_(block.to(compute))
    elif is_causal and query.shape[2] > 1:
        rows = torch.arange(start, stop, device=query.device)[:, None]
        future = torch.arange(key.shape[2], device=query.device)[None, :] > rows
        scores = scores.masked_fill_(future, floor)
    return torch.softmax(scores, dim=-1)


def _query_rows(bias: torch.Tensor, start: int, stop: int) -> torch.Tensor:
    """Rows start:stop of a (B, H, q, k) bias or mask; a broadcast query axis (size 1) is kept whole."""
    return bias if bias.shape[-2] == 1 else bias[..., start:stop, :]


def _stream_attention(
    module: torch.nn.Module,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attention_mask: torch.Tensor | None,
    dropout: float = 0.0,
    scaling: float | None = None,
    softcap: float | None = None,
    **kwargs: Any,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """The registered attention function: SDPA output, plus fused probabilities for the rollout.

    Called outside a capture (another thread using the same model object while a capture switched
    its config), it behaves like eager attention and returns the per-head weights.
    """
    for name in _UNSUPPORTED_KWARGS:
        if kwargs.get(name) is not None:
            raise UnsupportedModelError("Low-memory capture does not support attention sinks; use capture='full'.")
    accumulator = _ACTIVE.get()
    position_bias = kwargs.get("position_bias")
    is_causal = kwargs.get("is_causal")
    is_causal = bool(getattr(module, "is_causal", False) if is_causal is None else is_causal)
    options = dict(scaling=scaling, softcap=softcap, position_bias=position_bias, is_causal=is_causal)
    batch, heads, q_len, _ = query.shape
    k_len = key.shape[2]

    if accumulator is None:
        weights = _block_probabilities(query, key, attention_mask, 0, q_len, **options)
        weights = torch.nn.functional.dropout(weights.to(query.dtype), p=dropout, training=module.training)
        return torch.matmul(weights, _repeat_heads(value, heads)).transpose(1, 2).contiguous(), weights

    if q_len != k_len:
        raise UnsupportedModelError(
            "Low-memory capture needs self-attention over the whole input (no cross-attention, no cache); "
            "use capture='full' for this model."
        )
    layer = accumulator.next_layer()
    use_sdpa = softcap is None
    output = values = None
    if not use_sdpa:  # the output comes from the probability blocks
        output = torch.empty(batch, heads, q_len, value.shape[-1], dtype=value.dtype, device=value.device)
        values = _repeat_heads(value, heads)
    fused = None
    if accumulator.wants(layer) or not use_sdpa:
        step = _query_block(batch, heads, q_len)
        for start in range(0, q_len, step):
            stop = min(q_len, start + step)
            probs = _block_probabilities(query, key, attention_mask, start, stop, **options)
            if accumulator.wants(layer):
                block = fuse_heads(probs, how=accumulator.head_fusion)
                if fused is None:
                    fused = accumulator.fused_buffer(batch, q_len, block.dtype, block.device)
                fused[:, start:stop] = block
            if output is not None:
                output[:, :, start:stop] = torch.matmul(probs.to(value.dtype), values)
            del probs
    if fused is not None:
        accumulator.add(fused)
        del fused
    if use_sdpa:
        from transformers.integrations.sdpa_attention import sdpa_attention_forward

        accumulator.sdpa_layers += 1
        attn_output, _ = sdpa_attention_forward(
            module, query, key, value, attention_mask, dropout=dropout, scaling=scaling, **kwargs
        )
        return attn_output, None
    return output.transpose(1, 2).contiguous(), None


def _repeat_heads(states: torch.Tensor, heads: int) -> torch.Tensor:
    """(B, KV, n, d) -> (B, heads, n, d), query head h reading KV head h // (heads / KV)."""
    group = heads // states.shape[1]
    return states if group == 1 else states.repeat_interleave(group, dim=1)


# ----------------------------------------------------------------------------------------------
# Path 1: the attention interface


def _mask_function() -> Callable[..., Any]:
    """Masks for the streaming implementation: eager's additive float masks.

    Eager's format is safe in both directions if another thread's forward crosses the switch:
    SDPA, eager and `_block_probabilities` all read additive float masks.
    """
    from transformers.masking_utils import eager_mask

    return eager_mask


@contextlib.contextmanager
def _streaming_implementation(model: torch.nn.Module) -> Iterator[None]:
    """Point every config of `model` at "rollout_stream" for the duration, then restore everything."""
    from transformers import PretrainedConfig
    from transformers.masking_utils import AttentionMaskInterface
    from transformers.modeling_utils import AttentionInterface

    with _LOCK:
        registered = STREAM_IMPLEMENTATION not in AttentionInterface._global_mapping
        AttentionInterface._global_mapping[STREAM_IMPLEMENTATION] = _stream_attention
        AttentionMaskInterface._global_mapping[STREAM_IMPLEMENTATION] = _mask_function()
        configs = {id(m.config): m.config for m in model.modules() if isinstance(getattr(m, "config", None), PretrainedConfig)}
        saved = {key: cfg._attn_implementation_internal for key, cfg in configs.items()}
        try:
            for cfg in configs.values():
                cfg._attn_implementation_internal = STREAM_IMPLEMENTATION
            yield
        finally:
            for key, cfg in configs.items():
                cfg._attn_implementation_internal = saved[key]
            if registered:
                AttentionInterface._global_mapping.pop(STREAM_IMPLEMENTATION, None)
                AttentionMaskInterface._global_mapping.pop(STREAM_IMPLEMENTATION, None)


# ----------------------------------------------------------------------------------------------
# Path 2: forward hooks, for families that compute attention inline


def _innermost_attention_modules(model: torch.nn.Module) -> list[torch.nn.Module]:
    """Modules whose class name says Attention and that contain no other such module."""
    named = [m for m in model.modules() if "attention" in type(m).__name__.lower()]
    inner = []
    for module in named:
        if not any(child is not module and "attention" in type(child).__name__.lower() for child in module.modules()):
            inner.append(module)
    return inner


def _take_probabilities(output: Any) -> tuple[Any, torch.Tensor | None]:
    """Find the (B, H, n, n) probabilities in a module's output tuple; return the output without them."""
    if not isinstance(output, tuple):
        return output, None
    for index, item in enumerate(output):
        if isinstance(item, torch.Tensor) and item.dim() == 4 and item.shape[-1] == item.shape[-2]:
            return output[:index] + (None,) + output[index + 1 :], item
    return output, None


def _hook(module: torch.nn.Module, args: Any, output: Any) -> Any:
    accumulator = _ACTIVE.get()
    if accumulator is None:
        return output
    output, probs = _take_probabilities(output)
    if probs is None:
        return output
    layer = accumulator.next_layer()
    if accumulator.wants(layer):
        accumulator.add(fuse_heads(probs.float(), how=accumulator.head_fusion))
    return output


@contextlib.contextmanager
def _attention_hooks(model: torch.nn.Module) -> Iterator[None]:
    """Hook the innermost attention modules for the duration; the model runs eagerly."""
    modules = _innermost_attention_modules(model)
    if not modules:
        raise UnsupportedModelError(
            f"Low-memory capture found no attention modules in {type(model).__name__}; use capture='full'."
        )
    with _LOCK:
        handles = [m.register_forward_hook(_hook) for m in modules]
        try:
            yield
        finally:
            for h in handles:
                h.remove()
