"""Attention-free reference attributions and rank agreement with them.

Gradient x input and integrated gradients (`rollout_core.maths.attribution`, captum's numbers in plain torch) on
the continuous input of a `PreparedInput`: the word embeddings for text (the token ids are discrete), the
normalised pixels for images; the prepared input already is a differentiable function x -> logits.
- The explained output is the *logit* of the target class (the originally predicted one): gradients
  of the softmax probability vanish once the model is confident.
- Integrated gradients integrate from the same baseline the perturbation curves use ([MASK]
  embeddings, mean colour), so "removing" means the same thing everywhere; special tokens equal their
  baseline and get exactly zero. Completeness: the attributions sum to f(x) - f(baseline) up to the
  integration error (`integrated_gradients(..., return_delta=True)` reports it).
- Feature attributions are summed per position (signed: evidence for the target counts positive).
The registered methods of the same names (rollout_core/methods/grad_x_input.py, integrated_gradients.py) run
these on an explained input.
"""
from __future__ import annotations

from typing import Callable

import torch

from rollout_core.cancel import checkpoint
from rollout_core.inputs.continuous import MAX_BATCH, PreparedInput
from rollout_core.maths import attribution as maths
from rollout_core.maths.ranks import spearman  # noqa: F401  (measures.py's agreement columns)

IG_STEPS = 32
IG_CHUNKS = 4
"""The steps run in this many forward passes, with a stop checkpoint (and a progress report) at each."""


def input_x_gradient(prepared: PreparedInput, target: int) -> torch.Tensor:
    """(n,) gradient x input of the target logit, summed per position."""
    return prepared.to_positions(maths.input_x_gradient(prepared.forward, prepared.x, target)[0])


def integrated_gradients(
    prepared: PreparedInput, target: int, *, steps: int = IG_STEPS, return_delta: bool = False,
    progress: Callable[[int], None] | None = None,
) -> torch.Tensor | tuple[torch.Tensor, float]:
    """(n,) integrated gradients of the target logit from the removal baseline, summed per position.

    With `return_delta`, also the completeness gap |sum(attributions) - (f(x) - f(baseline))|.
    The steps run in IG_CHUNKS passes; a stop checkpoint precedes each and progress(steps done) follows it.
    """
    done = [0]

    def forward(inputs: torch.Tensor) -> torch.Tensor:
        checkpoint()  # a stopped page session stops its integrated gradients here (rollout_core.cancel)
        out = prepared.forward(inputs)
        done[0] += int(inputs.shape[0])
        if progress is not None:
            progress(min(done[0], int(steps)))
        return out

    chunk = min(MAX_BATCH, max(1, -(-int(steps) // IG_CHUNKS)))
    attr = maths.integrated_gradients(forward, prepared.x, prepared.baseline, target, steps=int(steps), chunk=chunk)
    scores = prepared.to_positions(attr[0])
    if not return_delta:
        return scores
    return scores, maths.completeness_gap(prepared.forward, prepared.x, prepared.baseline, target, attr)
