"""Gradient x input and integrated gradients of one class score, in plain torch.

Both take a differentiable `forward` (S, *features) -> (S, classes) and the input `x` (1, *features); they return
per-feature attributions of `x`'s shape (pool them to positions outside). They follow captum's `InputXGradient`
and `IntegratedGradients` (Gauss-Legendre steps, the steps run `chunk` at a time, each chunk's attributions
summed) operation for operation, so they give captum's numbers (tests/test_attribution_maths.py) without it.
"""
from __future__ import annotations

from typing import Callable

import numpy as np
import torch

Forward = Callable[[torch.Tensor], torch.Tensor]


def _target_gradient(forward: Forward, inputs: torch.Tensor, target: int) -> torch.Tensor:
    """d forward(inputs)[:, target] / d inputs, every row's score on its own row."""
    with torch.enable_grad():
        scores = forward(inputs)[:, int(target)]
        (grad,) = torch.autograd.grad(torch.unbind(scores), inputs)
    return grad


def input_x_gradient(forward: Forward, x: torch.Tensor, target: int) -> torch.Tensor:
    """x * d score / d x, per feature."""
    x = x.detach().clone().requires_grad_(True)
    return (x * _target_gradient(forward, x, target)).detach()


def gauss_legendre(steps: int) -> tuple[list[float], list[float]]:
    """(step sizes, alphas) of `steps`-point Gauss-Legendre quadrature on [0, 1]."""
    if steps < 1:
        raise ValueError(f"integrated gradients needs at least one step, not {steps}")
    points, weights = np.polynomial.legendre.leggauss(int(steps))
    return (0.5 * weights).tolist(), (0.5 * (1 + points)).tolist()


def integrated_gradients(forward: Forward, x: torch.Tensor, baseline: torch.Tensor, target: int, *, steps: int,
                         chunk: int) -> torch.Tensor:
    """(x - baseline) times the score's gradient integrated along the straight path from `baseline` to `x`, per
    feature; `chunk` points of the path per forward pass. By completeness the attributions sum to
    score(x) - score(baseline) up to the quadrature error (`completeness_gap`)."""
    sizes, alphas = gauss_legendre(steps)
    x, baseline = x.detach(), baseline.detach()
    per = max(1, int(chunk) // x.shape[0])
    total = None
    for start in range(0, len(alphas), per):
        part_alphas, part_sizes = alphas[start:start + per], sizes[start:start + per]
        k = len(part_alphas)
        path = torch.cat([baseline + alpha * (x - baseline) for alpha in part_alphas]).requires_grad_()
        grad = _target_gradient(forward, path, target)
        weighted = grad.contiguous().view(k, -1) * torch.tensor(part_sizes).float().view(k, 1).to(grad.device)
        part = weighted.reshape((k, x.shape[0], *grad.shape[1:])).sum(0) * (x - baseline)
        total = part if total is None else total + part
    return total


def completeness_gap(forward: Forward, x: torch.Tensor, baseline: torch.Tensor, target: int,
                     attributions: torch.Tensor) -> float:
    """|sum(attributions) - (score(x) - score(baseline))|: how far integrated gradients are from exact."""
    with torch.no_grad():
        scores = forward(torch.cat([x, baseline]))[:, int(target)].double()
    return float((attributions.double().sum() - (scores[0] - scores[1])).abs())
