"""The batch core: one capture of a padded batch, the chosen method, the explained rows -> BatchResult."""
from __future__ import annotations

import contextlib
import functools
from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np
import torch

from rollout_core import capture, lowmem, methods
from rollout_core.explanation_data import Deferred, Prediction
from rollout_core.maths.rollout import layer_attention
from rollout_core.maths.sinks import SinkReport, find_sinks, sink_facts
from rollout_core.methods._rows import weighted_rows
from rollout_core.models import domain, families
from rollout_core.models.handle import ModelHandle
from rollout_core.models.value_norms import record_value_norms
from rollout_core.options import Options
from rollout_core.pipeline.facts import handle_facts
from rollout_core.pipeline.heads import Head, HeadResult, causal_positions


@dataclass
class BatchResult:
    """Per-batch tensors (B first), cropped per sample by `arrays`."""

    n: int
    scores: torch.Tensor  # (B, n)
    layer_scores: torch.Tensor  # (L', B, n)
    layer_attention_scores: torch.Tensor  # (L', B, n)
    matrix: torch.Tensor | None  # (B, n, n)
    layer_attention: torch.Tensor | None  # (L', B, n, n); None on the low-memory path
    head_attention: torch.Tensor | None  # (L', B, H, n, n)
    predictions: list[list[Prediction] | None]
    targets: list[Any]
    descriptions: list[str]
    capture: str  # "full" | "lowmem"
    method_facts: dict[str, Any] = field(default_factory=dict)  # for the settings (MethodOutput.extras)
    sinks: SinkReport | None = None  # attention sinks of every layer (not on the low-memory path)
    features: torch.Tensor | None = None  # (B, d) what the classifier read, for models with domain statistics
    rolled_out: methods.RolledOut | None = None  # the final matrix is `layer_attention` rolled out so (`matrix` None)
    map_sums: torch.Tensor | None = None  # (L', B, n) the row sums `layer_attention` was renormalised from, if it was
    logits: torch.Tensor | None = None  # (B, C) a classifier's own class logits (HeadResult.logits)

    def arrays(self, b: int, n: int) -> dict[str, Any]:
        """Explanation fields of sample b, cropped to its first n positions (right padding). A rolled-out final
        matrix is `Deferred`: computed from the sample's per-layer maps when the Explanation's `matrix` is read."""
        def np_(t: torch.Tensor | None) -> np.ndarray | None:
            return None if t is None else (t.detach() if t.requires_grad else t).to("cpu", torch.float64).numpy()
        layers = self.layer_scores.shape[0]
        layer_attention = np.zeros((layers, 0, n)) if self.layer_attention is None else np_(
            self.layer_attention[:, b, :n, :n])
        matrix = np_(None if self.matrix is None else self.matrix[b, :n, :n])
        if self.rolled_out is not None and self.layer_attention is not None:
            sums = None if self.map_sums is None else np_(self.map_sums[:, b, :n])
            dtype = str(self.layer_attention.dtype).removeprefix("torch.")
            matrix = Deferred(functools.partial(_rolled_matrix, layer_attention, sums, self.rolled_out, dtype),
                              nbytes=n * n * 8)
        layer_scores = np_(self.layer_scores[:, b, :n])
        return {
            "scores": layer_scores[-1].copy(),  # `_build`: the final scores are the last layer's rows
            "layer_scores": layer_scores,
            "layer_attention_scores": np_(self.layer_attention_scores[:, b, :n]),
            "matrix": matrix,
            "layer_attention": layer_attention,
            "head_attention": np_(None if self.head_attention is None else self.head_attention[:, b, :, :n, :n]),
            "extras": {} if self.sinks is None else {"sinks": sink_facts(self.sinks, b, n)},
            "logits": np_(None if self.logits is None else self.logits[b]),
        }


def _rolled_matrix(maps: np.ndarray, sums: np.ndarray | None, rolled: methods.RolledOut, dtype: str) -> np.ndarray:
    """The deferred final matrix of one sample: its (L', n, n) per-layer maps (rows renormalised from `sums`, (L', n),
    when given) rolled out in the dtype the batch's maths ran in (the maps came from it)."""
    def batch_of_one(values: np.ndarray) -> torch.Tensor:
        return torch.from_numpy(values).to(getattr(torch, dtype))[:, None]

    return rolled.matrix(batch_of_one(maps), None, None if sums is None else batch_of_one(sums))[0].to(
        torch.float64).numpy()


def explain_batch(
    handle: ModelHandle, inputs: dict[str, Any], real: torch.Tensor, layout: families.ImageLayout | None,
    head: Head, targets: list[Any], opts: Options,
) -> BatchResult:
    """One padded batch through the capture (full, or streaming when chosen) and the method."""
    return explain_batch_methods(handle, inputs, real, layout, head, targets, [opts])[0]


def explain_batch_methods(
    handle: ModelHandle, inputs: dict[str, Any], real: torch.Tensor, layout: families.ImageLayout | None,
    head: Head, targets: list[Any], options: list[Options],
) -> list[BatchResult]:
    """`explain_batch` of each of `options` on one batch; those whose forward pass would be the same
    (`_shared_capture`) share one: the same capture, each method computed from it (equal to its own pass)."""
    pooling = handle_facts(handle).pooling
    patches = None if layout is None else layout.patch_positions.to(real.device)
    pooled = families.row_weights(pooling, real, patches)
    streamed = [_use_lowmem(handle, opts, real.shape) for opts in options]
    groups: dict[Any, list[int]] = {}
    for i, opts in enumerate(options):
        key = None if streamed[i] else _shared_capture(opts)
        groups.setdefault(i if key is None else key, []).append(i)
    results: list[BatchResult | None] = [None] * len(options)
    stats = domain.applicable(handle)  # a model with domain statistics: keep its features, for the warnings
    for members in groups.values():
        with domain.record_features(handle.model, None if stats is None else stats.module) as features, \
                without_autograd([options[i] for i in members]):
            if streamed[members[0]]:
                done = [_streamed_batch(handle, inputs, real, head, targets, options[members[0]], pooled, pooling)]
            else:
                done = _full_batch(handle, inputs, real, layout, head, targets, [options[i] for i in members],
                                   pooled, pooling)
        for i, result in zip(members, done):
            result.features = features[0] if features else None  # the first forward pass: the model's own
            results[i] = result
    return [r for r in results if r is not None]


def without_autograd(options: Sequence[Options]) -> contextlib.AbstractContextManager[Any]:
    """`torch.inference_mode` for a group whose methods all read the attention weights alone
    (`MethodSpec.attention_only`): nothing they compute is differentiated, so the forward pass and the maths skip
    autograd's bookkeeping (version counters, view tracking), a few microseconds on each of a few hundred torch calls.
    The tensors they return are inference tensors: read, converted or copied like any other, not changed in place."""
    if all(methods.get(o.method).attention_only for o in options):
        return torch.inference_mode()
    return contextlib.nullcontext()


def _shared_capture(opts: Options) -> tuple[bool, str | None] | None:
    """What decides the full capture's forward pass of `opts`' method when another method may share it: (hidden
    states asked for, heads fused in the pass with this fusion); None when it runs alone (gradients or recording
    hooks, which depend on the method)."""
    method = methods.get(opts.method)
    if method.needs_gradients or method.recorder is not None:
        return None
    return method.needs_hidden_states, opts.head_fusion if _fuse_in_forward(method, opts) else None


def _full_batch(
    handle: ModelHandle, inputs: dict[str, Any], real: torch.Tensor, layout: families.ImageLayout | None,
    head: Head, targets: list[Any], options: list[Options], pooled: torch.Tensor, pooling: str,
) -> list[BatchResult]:
    """The full capture (`capture.run`): every layer's attention, each method computed from it (several only when
    their passes are the same, `_shared_capture`)."""
    # the real-token mask, None when nothing is padded (MethodInput.mask): the maths skip every masked step then
    mask = real.long() if "attention_mask" in inputs and not bool(real.all()) else None
    found: dict[str, HeadResult] = {}
    method, opts = methods.get(options[0].method), options[0]

    def score(outputs: Any) -> torch.Tensor:  # a method that needs it runs only where the head has one (refusal)
        found["head"] = head(outputs, real, targets)
        return found["head"].score

    recorder = method.recorder(handle.model) if method.recorder else contextlib.nullcontext()
    with recorder as recorded, record_value_norms(handle.model) as value_norms:
        captured = capture.run(handle.model, inputs, num_layers=handle.num_layers,
                               score=score if method.needs_gradients else None,
                               hidden_states=method.needs_hidden_states,
                               head_fusion=opts.head_fusion if _fuse_in_forward(method, opts) else None)
    result = found.get("head") or head(captured.outputs, real, targets)
    weights = result.weights if result.weights is not None else pooled
    norms = value_norms.norms
    sinks = {fusion: find_sinks(captured.maths_attentions, norms, mask, head_fusion=fusion)  # once per fusion asked
             for fusion in dict.fromkeys(o.head_fusion for o in options)}
    return [_method_batch(handle, inputs, real, layout, captured, recorded, result, weights, mask, pooling, o,
                          sinks[o.head_fusion]) for o in options]


def _method_batch(
    handle: ModelHandle, inputs: dict[str, Any], real: torch.Tensor, layout: families.ImageLayout | None,
    captured: capture.Captured, recorded: Any, result: HeadResult, weights: torch.Tensor, mask: torch.Tensor | None,
    pooling: str, opts: Options, sinks: SinkReport,
) -> BatchResult:
    """One method's BatchResult from a full capture and its sinks (found with the method's head fusion)."""
    method = methods.get(opts.method)
    atts = captured.attentions
    s, e = opts.start_layer, opts.end_layer
    out = methods.compute(method, methods.MethodInput(handle, inputs, captured, opts, mask, weights,
                                                      full_matrix=layout is None, recorded=recorded,
                                                      target_index=result.classes))
    layer_att = out.layer_maps if out.layer_maps is not None else layer_attention(
        atts[s:e], head_fusion=opts.head_fusion, attention_mask=mask)
    w = weights.to(layer_att.dtype)
    batch = _build(
        real, result, pooling, "full", layer_rows=out.layer_rows,
        layer_attention_scores=weighted_rows(w, layer_att), matrix=out.matrix,
        layer_attention=layer_att, head_attention=torch.stack(atts[s:e]) if opts.keep_heads else None,
        method_facts=out.extras, sinks=sinks,
    )
    batch.rolled_out, batch.map_sums = out.rolled_out, out.map_sums
    return batch


def _fuse_in_forward(method: methods.MethodSpec, opts: Options) -> bool:
    """Heads fused as each layer finishes (capture.fused_heads): the method and the views read attention only
    through the options' fusion, and nobody asked for the per-head maps."""
    return method.fused_heads_suffice and not method.needs_gradients and not opts.keep_heads


def _use_lowmem(handle: ModelHandle, opts: Options, shape: torch.Size) -> bool:
    if opts.capture == "full" or handle.task == "seq2seq" or not methods.get(opts.method).can_stream:
        return False
    if opts.capture == "lowmem":
        return True
    needed = lowmem.estimate_full_capture_bytes(handle.num_layers, handle.num_heads, shape[1], shape[0])
    return needed > lowmem.memory_budget_bytes()


def _streamed_batch(
    handle: ModelHandle, inputs: dict[str, Any], real: torch.Tensor, head: Head, targets: list[Any],
    opts: Options, pooled: torch.Tensor, pooling: str,
) -> BatchResult:
    """The streaming capture (`lowmem.streaming_rollout`): the rows of the explained positions only, no
    per-layer matrices. The explained positions must be known before the forward pass."""
    weights = pooled
    if handle.task == "causal-lm":
        weights = torch.zeros_like(pooled)
        positions = causal_positions(real, targets)
        weights[torch.arange(real.shape[0]), torch.tensor(positions, device=real.device)] = 1.0
    rows = torch.nonzero(weights.sum(0)).flatten().tolist()
    streamed = lowmem.streaming_rollout(
        handle, inputs, head_fusion=opts.head_fusion, residual_weight=opts.residual_weight,
        discard_ratio=opts.discard_ratio, start_layer=opts.start_layer, end_layer=opts.end_layer, rows=rows)
    w_rows = weights[:, rows].to(torch.float64)
    return _build(
        real, head(streamed.outputs, real, targets), pooling, "lowmem",
        layer_rows=torch.einsum("br,lbrj->lbj", w_rows, streamed.layer_rows.double()),
        layer_attention_scores=torch.einsum("br,lbrj->lbj", w_rows, streamed.layer_attention_rows.double()),
        matrix=streamed.matrix, layer_attention=None, head_attention=None, method_facts=_row_only_facts(streamed),
    )


def _row_only_facts(streamed: lowmem.Streamed) -> dict[str, Any]:
    """Settings of the row-only streaming mode (none for the full matrix): why there is no matrix, the files."""
    if streamed.spill is None:
        return {}
    return {"lowmem_mode": "rows only", "spill_dtype": streamed.spill["dtype"],
            "spill_mib": round(streamed.spill["bytes"] / 2**20, 1),
            "matrix_note": "the full n x n rollout is not available: it would exceed the memory budget "
                           "(ROLLOUT_MEMORY_BUDGET_MB), so only the explained rows were computed"}


def _build(
    real: torch.Tensor, result: HeadResult, pooling: str, capture_mode: str, *, layer_rows: torch.Tensor,
    layer_attention_scores: torch.Tensor, matrix: torch.Tensor | None, layer_attention: torch.Tensor | None,
    head_attention: torch.Tensor | None, method_facts: dict[str, Any] | None = None,
    sinks: SinkReport | None = None,
) -> BatchResult:
    """The one BatchResult builder of both captures: the final scores are the last layer's rows."""
    description = _row_description(pooling, result.weights is not None, real)
    return BatchResult(
        n=real.shape[1], scores=layer_rows[-1], layer_scores=layer_rows, layer_attention_scores=layer_attention_scores,
        matrix=matrix, layer_attention=layer_attention, head_attention=head_attention,
        predictions=result.predictions, targets=result.targets,
        descriptions=[_join(description[b], result.descriptions[b]) for b in range(real.shape[0])],
        capture=capture_mode, method_facts=dict(method_facts or {}), sinks=sinks, logits=result.logits,
    )


def _row_description(pooling: str, positional: bool, real: torch.Tensor) -> list[str]:
    if positional:
        return [""] * real.shape[0]
    if pooling == "mean":
        return [f"mean of the {int(c)} token rows" for c in real.sum(-1)]
    return [families.POOLINGS[pooling]] * real.shape[0]


def _join(*parts: str) -> str:
    return "; ".join(p for p in parts if p)
