"""What a method declares and what it gets and gives: the contract of the method registry.

A method module defines `METHOD = MethodSpec(...)` and a `compute(MethodInput) -> MethodOutput` that turns one
capture (the forward pass the pipeline ran) into the explained rows after each layer of the chosen range.
The facts a spec declares are what the CLI, the sidebar, the summaries and `evaluate` read instead of lists of
names, so a new method is one file (plus its test).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, ContextManager

if TYPE_CHECKING:  # torch stays out of the registry's import, so the CLI can list methods before loading it
    import torch

    from rollout_core.capture import Captured
    from rollout_core.models.handle import ModelHandle
    from rollout_core.options import Options


@dataclass(frozen=True)
class MethodInput:
    """One batch's capture and what the method needs to read it."""

    handle: "ModelHandle"
    inputs: dict[str, Any]  # the model's keyword inputs (on its device)
    captured: "Captured"
    options: "Options"  # resolved: end_layer is a number
    mask: "torch.Tensor | None"  # (B, n) 1 = real token, or None (no padding in the batch)
    weights: "torch.Tensor"  # (B, n) how the explained row mixes output positions (one-hot or pooled)
    full_matrix: bool  # the caller wants the final n x n matrix (text pages), not only the explained rows
    recorded: Any = None  # what the spec's `recorder` collected during the forward pass
    target_index: "torch.Tensor | None" = None  # (B,) the explained class of each sample (classifiers), else None


@dataclass
class MethodOutput:
    """The explained rows after each layer of the range, (L', B, n), and the final (B, n, n) matrix if any.
    `layer_maps`, (L', B, n, n): the method's own matrix of each layer alone (a contribution measure), which the
    slider's per-layer view shows instead of the layer's head-fused attention; None: that attention."""

    layer_rows: "torch.Tensor"
    matrix: "torch.Tensor | None"
    extras: dict[str, Any] = field(default_factory=dict)  # facts for Explanation.settings (e.g. an error bound)
    layer_maps: "torch.Tensor | None" = None


@dataclass(frozen=True)
class MethodSpec:
    """The facts of one method. `compute` is looked up in the module when the method runs."""

    name: str  # the id in URLs, the CLI and settings
    title: str  # the picker's label
    phrase: str  # how a summary names it: "attention rollout through 6 layers"
    description: str  # one sentence for help texts
    order: int  # position in pickers and tables
    class_specific: bool = False  # the map changes with the class asked about
    needs_gradients: bool = False  # the capture must keep the graph and differentiate the explained score
    needs_hidden_states: bool = False  # the capture asks the model for every layer's hidden states
    uses_head_fusion: bool = True  # the head-fusion setting changes the result
    uses_residual: bool = True  # the residual weight changes the result
    cumulative: bool = True  # the slider's layer k is the result through layers start..k (not layer k alone)
    single_layer: bool = False  # the result at layer k is layer k's own per-layer view alone (raw attention)
    layered: bool = True  # False: one map of the whole model (AttnLRP), the same at every slider position
    can_stream: bool = False  # the low-memory capture (no per-layer attention kept) can compute it
    seq2seq: bool = False  # available for encoder-decoder models
    modalities: tuple[str, ...] = ("text", "image")  # the inputs it explains
    layer_view: str = "raw attention"  # what the slider's per-layer view shows (MethodOutput.layer_maps)
    first_layer: "Callable[[ModelHandle], int] | None" = None  # the lowest layer the method reads on a model
    # (the layers below count as the identity): a start_layer below it is raised to it, so the slider, the
    # summary and the settings show only the layers the result depends on
    recorder: "Callable[[Any], ContextManager[Any]] | None" = None  # hooks active during the forward pass
    compute: "Callable[[MethodInput], MethodOutput] | None" = None
