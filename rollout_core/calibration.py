"""Calibration of a classifier's probabilities: expected calibration error and temperature scaling.

A temperature T divides the logits before the softmax; it keeps every prediction (the arg-max) and only
changes how confident the probabilities are. `fit_temperature` picks T by minimising the negative
log-likelihood on held-out logits; a built model folder may store it in its config as
`CONFIG_KEY` (default-text does, see rollout_core.build.text_model), and `calibrated_probabilities` gives
the probabilities a head reports with it (pipeline.heads.classifier_head).
"""
from __future__ import annotations

from typing import Any, Sequence

import torch

CONFIG_KEY = "calibration_temperature"
"""Key of the fitted temperature in a model folder's config.json."""
ECE_BINS = 10


def expected_calibration_error(confidence: Sequence[float], correct: Sequence[bool], bins: int = ECE_BINS) -> float:
    """ECE: sum over `bins` equal-width confidence bins of (share of samples) x |accuracy - mean confidence|.

    `confidence` is the probability of the predicted class; bins are (k/bins, (k+1)/bins], the first one
    also holds 0.
    """
    conf = torch.as_tensor(confidence, dtype=torch.float64)
    hit = torch.as_tensor(correct, dtype=torch.float64)
    if conf.ndim != 1 or conf.shape != hit.shape or not len(conf):
        raise ValueError("confidence and correct must be two non-empty lists of the same length")
    index = (torch.ceil(conf * bins).long() - 1).clamp(0, bins - 1)
    total = 0.0
    for k in range(bins):
        members = index == k
        if members.any():
            total += members.double().mean().item() * abs(hit[members].mean().item() - conf[members].mean().item())
    return total


def classifier_ece(logits: torch.Tensor, labels: torch.Tensor, temperature: float = 1.0) -> float:
    """ECE of softmax(logits / temperature) against integer `labels`."""
    probs = torch.softmax(logits.double() / temperature, dim=-1)
    confidence, predicted = probs.max(-1)
    return expected_calibration_error(confidence.tolist(), (predicted == labels).tolist())


def fit_temperature(logits: torch.Tensor, labels: torch.Tensor, steps: int = 100) -> float:
    """The temperature minimising the mean cross-entropy of softmax(logits / T) on `labels` (LBFGS on log T)."""
    logits, labels = logits.detach().double(), labels.detach().long()
    log_t = torch.zeros((), dtype=torch.float64, requires_grad=True)
    optimizer = torch.optim.LBFGS([log_t], lr=0.5, max_iter=steps, line_search_fn="strong_wolfe")

    def closure() -> torch.Tensor:
        optimizer.zero_grad()
        loss = torch.nn.functional.cross_entropy(logits / log_t.exp(), labels)
        loss.backward()
        return loss

    optimizer.step(closure)
    return float(log_t.detach().exp())


def config_temperature(config: Any) -> float | None:
    """The calibration temperature stored in a model config, if any (a positive finite number)."""
    value = getattr(config, CONFIG_KEY, None)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value < float("inf"):
        return None
    return float(value)


def calibrated_probabilities(logits: torch.Tensor, temperature: float) -> torch.Tensor:
    """softmax(logits / temperature) over the last axis, in float32 or wider: the probabilities a calibrated
    single-label classifier reports (its arg-max, the predicted class, is the logits' own)."""
    logits = logits.detach() if logits.requires_grad else logits
    return torch.softmax((logits if logits.dtype == torch.float32 else logits.float()) / temperature, dim=-1)
