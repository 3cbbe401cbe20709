"""What a method declares and what it gets and gives: the contract of the method registry.

A method module defines `METHOD = MethodSpec(...)` and a `compute(MethodInput) -> MethodOutput` that turns one
capture (the forward pass the pipeline ran) into the explained rows after each layer of the chosen range.
The facts a spec declares are what the CLI, the sidebar, the summaries and `evaluate` read instead of lists of
names, so a new method is one file (plus its test).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, ContextManager

from rollout_core.errors import InputError, RolloutError, UnsupportedModelError

if TYPE_CHECKING:  # torch stays out of the registry's import, so the CLI can list methods before loading it
    import torch

    from rollout_core.capture import Captured
    from rollout_core.inputs.continuous import PreparedInput
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


@dataclass(frozen=True)
class RolledOut:
    """How a method's per-layer maps multiply into its final matrix: each augmented like attention in rollout
    (discard, + residual_weight * I, rows renormalised) and multiplied, the first layer of the range rightmost."""

    residual_weight: float
    discard_ratio: float

    def matrix(self, maps: "torch.Tensor", attention_mask: "torch.Tensor | None" = None,
               row_sums: "torch.Tensor | None" = None) -> "torch.Tensor":
        """The (B, n, n) product of `maps` (L', B, n, n); `row_sums` (L', B, n): the maps are rows renormalised
        from these sums (rollout's per-layer view), multiplied back before the product."""
        from rollout_core.maths.rollout import augment_layers, multiplied_

        layers = maps if row_sums is None else maps * row_sums.unsqueeze(-1)
        return multiplied_(augment_layers(layers, residual_weight=self.residual_weight,
                                          discard_ratio=self.discard_ratio, attention_mask=attention_mask,
                                          in_place=row_sums is not None))


@dataclass
class MethodOutput:
    """The explained rows after each layer of the range, (L', B, n), and the final (B, n, n) matrix if any.
    `layer_maps`, (L', B, n, n): the method's own matrix of each layer alone (a contribution measure), which the
    slider's per-layer view shows instead of the layer's head-fused attention; None: that attention.
    `rolled_out`: the final matrix is `layer_maps` rolled out so (`matrix` is then None; `map_sums` the row sums
    the maps were renormalised from, if they were): left to whoever reads it (`final_matrix`; the pipeline defers
    it to the Explanation's first read of `matrix`)."""

    layer_rows: "torch.Tensor"
    matrix: "torch.Tensor | None"
    extras: dict[str, Any] = field(default_factory=dict)  # facts for Explanation.settings (e.g. an error bound)
    layer_maps: "torch.Tensor | None" = None
    rolled_out: RolledOut | None = None
    map_sums: "torch.Tensor | None" = None  # (L', B, n)

    def final_matrix(self, attention_mask: "torch.Tensor | None" = None) -> "torch.Tensor | None":
        """The (B, n, n) final matrix: `matrix`, or the product of `layer_maps` as `rolled_out` says (computed now;
        `attention_mask` the batch's, (B, n))."""
        if self.rolled_out is None or self.layer_maps is None:
            return self.matrix
        return self.rolled_out.matrix(self.layer_maps, attention_mask, self.map_sums)


@dataclass(frozen=True)
class Workload:
    """The size of one explain request, counted before any forward pass: what a method's cost estimate reads
    (`MethodSpec.seconds`). Built from a loaded model and an input by `serving.budget.workload`."""

    tokens: int  # positions of one input: text tokens, or an image's patches plus its special tokens
    layers: int  # layers of the explained range
    model_layers: int  # layers the forward pass runs (the whole encoder)
    heads: int
    hidden: int  # the model's hidden size
    outputs: int = 1  # positions the readout pools (1: one position, [CLS] or the predicted token)
    image: bool = False
    batch: int = 1  # inputs explained together
    full_matrix: bool = False  # the whole final n x n matrix is asked for, not only the explained row
    discard: bool = False  # a discard ratio above 0: rollout multiplies its final matrix during the explanation


SCORED_TASKS = ("text-classification", "image-classification", "causal-lm")
"""Tasks whose head gives a differentiable explained score (a sentence encoder has one with zero-shot labels)."""
CLASSIFIER_TASKS = ("text-classification", "image-classification")
"""Tasks whose model has class logits of its own."""


@dataclass(frozen=True)
class MethodSpec:
    """The facts of one method. `compute` is looked up in the module when the method runs."""

    name: str  # the id in URLs, the CLI and settings
    title: str  # the display name: the picker's label and what tables and captions call it
    phrase: str  # how a summary names it: "attention rollout through 6 layers"
    description: str  # one sentence for help texts
    use_when: str = ""  # one line on when to reach for it (the home page and the method table's readers)
    explains: str = ""  # what a value means, for the method table: "share of the [CLS] row ..."
    class_specific: bool = False  # the map changes with the class asked about
    signed: bool = False  # values speak for (positive) or against (negative) the class; else non-negative shares
    needs_gradients: bool = False  # the capture must keep the graph and differentiate the explained score
    needs_classes: bool = False  # reads the model's own class logits (a classifier head)
    needs_hidden_states: bool = False  # the capture asks the model for every layer's hidden states
    uses_head_fusion: bool = True  # the head-fusion setting changes the result
    uses_residual: bool = True  # the residual weight changes the result
    uses_discard: bool = True  # the discard ratio changes the result (it thins the matrices rolled out)
    cumulative: bool = True  # the slider's layer k is the result through layers start..k (not layer k alone)
    single_layer: bool = False  # the result at layer k is layer k's own per-layer view alone (raw attention)
    layered: bool = True  # False: one map of the whole model (AttnLRP), the same at every slider position
    attention_only: bool = False  # computed from the forward pass's attention weights alone (int8 corpus mode)
    fused_heads_suffice: bool = False  # reads the attentions only through `fuse_heads` with the options' fusion, so
    # the full capture may fuse each layer's heads inside the forward pass (capture.fused_heads)
    can_stream: bool = False  # the low-memory capture (no per-layer attention kept) can compute it
    seq2seq: bool = False  # available for encoder-decoder models
    modalities: tuple[str, ...] = ("text", "image")  # the inputs it explains
    layer_view: str = "raw attention"  # what the slider's per-layer view shows (MethodOutput.layer_maps)
    first_layer: "Callable[[ModelHandle], int] | None" = None  # the lowest layer the method reads on a model
    # (the layers below count as the identity): a start_layer below it is raised to it, so the slider, the
    # summary and the settings show only the layers the result depends on
    recorder: "Callable[[Any], ContextManager[Any]] | None" = None  # hooks active during the forward pass
    compute: "Callable[[MethodInput], MethodOutput] | None" = None
    requires: "Callable[[ModelHandle], RolloutError | None] | None" = None  # the model facts it needs beyond
    # the declared ones (a family whose layers it reads, a training record): why not, or None
    facts: "Callable[[dict[str, Any]], str] | None" = None  # one line from Explanation.settings for the CLI and
    # the pages ("attention flow: exact; explained row only"), "" when there is nothing to say
    summary_note: str = ""  # what the summary adds after the attention sinks it lists
    cost: "Callable[[Workload], float] | None" = None  # estimated seconds of one request on this machine class
    # (constants measured by benchmarks/bench_method_costs.py); every registered method declares one
    agreement: str = ""  # an attention-free reference of the evaluation: the key of its rank-agreement measure
    # (spearman_<key>); the evaluation measures such a method only when asked
    attribute: "Callable[[PreparedInput, int, Callable[[int], None] | None], torch.Tensor] | None" = None
    # attention-free: (n,) attributions of one prepared continuous input (rollout_core.inputs.continuous) for a
    # class, progress(passes done) after each pass: what the evaluation computes on the input it perturbs
    passes: int = 1  # forward passes `attribute` takes (the evaluation's progress)

    @property
    def attention_free(self) -> bool:
        """Reads no attention: attributions of the input's features (an evaluation reference)."""
        return self.attribute is not None

    @property
    def whole_model(self) -> bool:
        """One map of the whole model: every layer-slider position shows the same map."""
        return not self.layered

    def refusal(self, handle: "ModelHandle", *, capture: str = "auto", zero_shot: bool = False
                ) -> RolloutError | None:
        """Why this method cannot run on `handle` with `capture` (None: it can), from the model's facts alone,
        before any forward pass. `zero_shot`: zero-shot labels were given (a sentence encoder then has a score).
        The one place this is decided: explain, the CLI, the pickers and evaluate ask here."""
        if handle.modality not in self.modalities:
            return InputError(f"{self.name} cannot explain {handle.modality} inputs")
        if handle.task == "seq2seq" and not self.seq2seq:
            return InputError(f"{self.name} does not explain encoder-decoder models")
        if capture == "lowmem" and not self.can_stream:
            return InputError(f"the low-memory capture cannot compute {self.name}; use capture='full'")
        if self.needs_classes and handle.task not in CLASSIFIER_TASKS:
            return UnsupportedModelError(f"{self.title} ({self.name}) needs a classifier (its class logits); "
                                         f"{handle.name} is a {handle.task} model")
        if self.needs_gradients and handle.task not in SCORED_TASKS and not (
                handle.task == "sentence-encoder" and zero_shot):
            return InputError(f"{self.title} ({self.name}) needs a score to differentiate: this model has no "
                              "prediction head"
                              + (" (give zero-shot labels)" if handle.task == "sentence-encoder" else ""))
        return None if self.requires is None else self.requires(handle)

    def seconds(self, workload: Workload) -> float:
        """Estimated seconds of explaining `workload` with this method (forward pass included): the budget's and
        the pages' estimate."""
        if self.cost is None:
            raise InputError(f"method {self.name!r} declares no cost estimate")
        return float(self.cost(workload))

    def describe(self, settings: dict[str, Any]) -> str:
        """The facts line of an explanation of this method ("" when the method has none to say)."""
        return self.facts(settings) if self.facts is not None else ""
