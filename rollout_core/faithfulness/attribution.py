"""Attention-free reference attributions and rank agreement with them.

Gradient x input and integrated gradients are taken with captum (`InputXGradient`,
`IntegratedGradients`) on the continuous input of a `PreparedInput`: the word embeddings for text (the
token ids are discrete), the normalised pixels for images. Captum fits cleanly because the prepared
input already is a differentiable function x -> logits; nothing has to be patched into the model.
- The explained output is the *logit* of the target class (the originally predicted one): gradients
  of the softmax probability vanish once the model is confident.
- Integrated gradients integrate from the same baseline the perturbation curves use ([MASK]
  embeddings, mean colour), so "removing" means the same thing everywhere; special tokens equal their
  baseline and get exactly zero. Completeness: the attributions sum to f(x) - f(baseline) up to the
  integration error (`integrated_gradients(..., return_delta=True)` reports it).
- Feature attributions are summed per position (signed: evidence for the target counts positive).
"""
from __future__ import annotations

from typing import Any, Callable

import torch

from rollout_core.cancel import checkpoint
from rollout_core.extras import require
from rollout_core.faithfulness.scoring import MAX_BATCH, PreparedInput
from rollout_core.maths.ranks import spearman  # noqa: F401  (measures.py's agreement columns)

IG_STEPS = 32
IG_CHUNKS = 4
"""The steps run in this many forward passes, with a stop checkpoint (and a progress report) at each."""


def input_x_gradient(prepared: PreparedInput, target: int) -> torch.Tensor:
    """(n,) gradient x input of the target logit, summed per position."""
    InputXGradient = require("captum.attr", "evaluate", "captum").InputXGradient

    x = prepared.x.detach().clone().requires_grad_(True)
    with torch.enable_grad():
        attr = InputXGradient(prepared.forward).attribute(x, target=int(target))
    return prepared.to_positions(attr[0].detach())


def integrated_gradients(
    prepared: PreparedInput, target: int, *, steps: int = IG_STEPS, return_delta: bool = False,
    progress: Callable[[int], None] | None = None,
) -> torch.Tensor | tuple[torch.Tensor, float]:
    """(n,) integrated gradients of the target logit from the removal baseline, summed per position.

    With `return_delta`, also captum's completeness gap sum(attributions) - (f(x) - f(baseline)).
    The steps run in IG_CHUNKS passes; a stop checkpoint precedes each and progress(steps done) follows it.
    """
    IntegratedGradients = require("captum.attr", "evaluate", "captum").IntegratedGradients

    done = [0]

    def forward(inputs: torch.Tensor, *args: Any) -> torch.Tensor:
        checkpoint()  # a stopped page session stops its integrated gradients here (rollout_core.cancel)
        out = prepared.forward(inputs, *args)
        done[0] += int(inputs.shape[0])
        if progress is not None:
            progress(min(done[0], int(steps)))  # captum's completeness check adds two rows at the end
        return out

    x = prepared.x.detach().clone().requires_grad_(True)
    chunk = min(MAX_BATCH, max(1, -(-int(steps) // IG_CHUNKS)))
    with torch.enable_grad():
        # the completeness check costs two more forward rows: only when asked for
        found = IntegratedGradients(forward).attribute(
            x, baselines=prepared.baseline.detach(), target=int(target), n_steps=int(steps),
            internal_batch_size=chunk, return_convergence_delta=return_delta)
    attr, delta = found if return_delta else (found, None)
    scores = prepared.to_positions(attr[0].detach())
    return (scores, float(delta.detach().abs().max())) if return_delta else scores

