"""Attention flow (Abnar & Zuidema 2020): the max flow from an output to each input through the layer graph."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from rollout_core.methods._cost import forward_seconds
from rollout_core.methods._spec import MethodInput, MethodOutput, MethodSpec, Workload

if TYPE_CHECKING:
    import torch


def compute(method_input: MethodInput) -> MethodOutput:
    """The explained rows after each layer of the range (one max-flow problem per input token and layer
    prefix); the whole final n x n matrix (n² more problems) only when Options.full_matrix asks for it.

    A readout of one position per sample ([CLS], the predicted position) uses that output's flow row. A
    pooled readout (mean pooling, DINOv2's [CLS] + patch mean) is the flow into a super-sink fed by the
    pooled positions (maths.flow.pooled_attention_flow): one problem per input token, not one per
    (output, input) pair. Images (`full_matrix` False in the input: no matrix view) use the mass-pruned
    flow of maths.flow_bounded, whose sound error bound goes to the settings as flow_error_bound."""
    import torch

    from rollout_core.maths.flow import attention_flow, pooled_attention_flow
    from rollout_core.maths.flow_bounded import DEFAULT_EPS, bounded_attention_flow, flow_cost_estimate

    opts, weights, atts = method_input.options, method_input.weights, method_input.captured.attentions
    approximate = not method_input.full_matrix
    full = method_input.full_matrix and bool(getattr(opts, "full_matrix", False))
    common: dict[str, Any] = dict(head_fusion=opts.head_fusion, residual_weight=opts.residual_weight,
                                  attention_mask=method_input.mask, start_layer=opts.start_layer)
    single = bool(((weights > 0).sum(-1) == 1).all())
    outputs = torch.nonzero(weights.sum(0)).flatten().tolist()
    rows, bound, relative = [], 0.0, 0.0
    for top in range(opts.start_layer + 1, opts.end_layer + 1):
        target: dict[str, Any] = dict(output_tokens=outputs) if single else dict(weights=weights)
        if approximate:
            result = bounded_attention_flow(atts, eps=DEFAULT_EPS, end_layer=top, **target, **common)
            flow, bound = result.values.double(), max(bound, result.error_bound)
        elif single:
            flow = attention_flow(atts, output_tokens=outputs, end_layer=top, **common).double()
        else:
            flow = pooled_attention_flow(atts, weights, end_layer=top, **common).double()[:, None]
        rows.append(_explained(flow, weights, outputs if single else None))
        if approximate:  # the map is drawn on a scale up to its largest value: the bound as a share of that
            relative = max(relative, result.error_bound / max(float(rows[-1].amax(-1).min()), 1e-300))
    matrix = attention_flow(atts, end_layer=opts.end_layer, **common).double() if full else None
    n = int((weights.shape[-1] if method_input.mask is None else method_input.mask.sum(-1).max()))
    extras = {
        "flow_rows": "all rows (full matrix)" if full else "explained row only",
        "flow_full_matrix_cost": flow_cost_estimate(n, opts.layers, n) if method_input.full_matrix else None,
        "flow_approximate": approximate,
        "flow_error_bound": bound if approximate else 0.0,
        "flow_error_share": relative,
        "flow_pruned_mass": DEFAULT_EPS if approximate else 0.0,
    }
    if approximate and relative >= 1.0:  # a bound above the map leaves nothing to read: views do not draw it
        why = (f"Attention flow is not meaningful here: the pruned flow's error bound ({bound:.1e}) is "
               f"{relative:.0%} of the map's largest value, so no patch's value can be told from 0; use another "
               "method (ALTI, rollout) for this image.")
        extras["notes"], extras["not_meaningful"] = (why,), why
    return MethodOutput(layer_rows=torch.stack(rows), matrix=matrix, extras=extras)


SOLVER_FACTOR = 0.7
"""The solver's seconds per edge walked, in units of maths.flow_bounded's figure (SECONDS_PER_EDGE)."""
PROBLEM_SECONDS = 2.5e-5
"""Per max-flow problem, whatever its size: building its row graph and the call into the solver."""


def cost_seconds(n: int, layers: int, *, outputs: int = 1, image: bool = False, full_matrix: bool = False) -> float:
    """Estimated seconds of `compute` on one n-token input through `layers` layers, from
    maths.flow_bounded.flow_cost_estimate: one row per layer prefix (mass-pruned on images), plus the whole
    final matrix when `full_matrix` asks for it (text only). `outputs`: the positions the readout pools."""
    from rollout_core.maths.flow_bounded import PRUNED_EDGE_SHARE, flow_cost_estimate

    kept = PRUNED_EDGE_SHARE if image else 1.0
    parts = [flow_cost_estimate(n, top, 1, outputs=outputs, kept=kept) for top in range(1, layers + 1)]
    if full_matrix and not image:
        parts.append(flow_cost_estimate(n, layers, n))
    return sum(SOLVER_FACTOR * part["seconds"] + PROBLEM_SECONDS * part["max_flows"] for part in parts)


def cost(w: Workload) -> float:
    """The forward pass and the max-flow problems (`cost_seconds`), per input of the batch."""
    solver = cost_seconds(w.tokens, w.layers, outputs=w.outputs, image=w.image, full_matrix=w.full_matrix)
    return forward_seconds(w) + w.batch * solver


def _explained(flow: "torch.Tensor", weights: "torch.Tensor", outputs: "list[int] | None") -> "torch.Tensor":
    """(B, n): the output rows mixed by the readout weights, or the pooled row as it is."""
    import torch

    if outputs is None:
        return flow[:, 0]
    return torch.einsum("bk,bkn->bn", weights[:, outputs].double(), flow)


def describe(settings: dict[str, Any]) -> str:
    """One line for the CLI and the pages: exact or approximate (with the bound), and which rows are held."""
    if "flow_rows" not in settings:
        return ""
    cost = settings.get("flow_full_matrix_cost") or {}
    kind = "exact"
    if settings.get("flow_approximate"):
        pruned = f"each row pruned to {1 - settings['flow_pruned_mass']:.0%} of its mass"
        bound = settings["flow_error_bound"]
        share = settings.get("flow_error_share", 0.0)
        kind = (f"exact here ({pruned}; the error bound is 0)" if bound == 0 else
                f"not meaningful here (error bound {bound:.1e} is {share:.0%} of the map's largest value; {pruned})"
                if share >= 1.0 else
                f"approximate (error <= {bound:.1e}, {share:.1%} of the map's largest value; {pruned})")
    line = f"attention flow: {kind}; {settings['flow_rows']}"
    if settings["flow_rows"] == "explained row only" and cost:
        line += (f" (the full matrix, not computed unless asked for, is {cost['max_flows']:.0f} max-flow problems, "
                 f"about {_seconds(cost['seconds'])})")
    return line


def _seconds(seconds: float) -> str:
    """A duration as people read it: "under 0.01 s", "0.4 s", "12 s", "3 min"."""
    if seconds < 0.01:
        return "under 0.01 s"
    if seconds < 60:
        return f"{seconds:.2g} s"
    return f"{seconds / 60:.0f} min"


METHOD = MethodSpec(
    name="flow",
    title="Attention flow",
    phrase="attention flow",
    description="Treats the residual-augmented attention of every layer as edge capacities and takes the maximum flow.",
    use_when="To see how much information can reach the output at most (a capacity view of the same graph); slow on "
             "long inputs and rarely on the deciding words.",
    explains="How much of each input's information can reach the explained output: the maximum flow through "
             "the layers' residual-augmented attention.",
    attention_only=True,
    fused_heads_suffice=True,
    facts=describe,
    cost=cost,
    compute=compute,
    uses_discard=False,
)
