"""One explanation's deletion AUC on its own input, against random orderings: a check for models without
ground truth (the dashboard's "Check this map")."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from rollout_core.errors import InputError
from rollout_core.explanation import Explanation
from rollout_core.faithfulness.perturbation import perturbation_curves_many
from rollout_core.inputs.continuous import prepare_image, prepare_text
from rollout_core.models.handle import ModelHandle

CHECK_SEEDS = 10


@dataclass(frozen=True)
class DeletionCheck:
    """Deletion AUC (lower: the map found what the model uses) of the map and the mean of random orderings."""

    method_auc: float
    random_auc: float
    random_std: float
    seeds: int
    label: str  # the class whose probability the curves follow


def check_deletion(handle: ModelHandle, input: Any, explanation: Explanation,
                   seeds: int = CHECK_SEEDS) -> DeletionCheck:
    """Remove the map's top positions first (0..100% in steps of 10%) and follow the predicted class's
    probability; the same for `seeds` random orderings. `input` is what `explanation` explained."""
    prepared = prepare_text(handle, input) if handle.modality == "text" else prepare_image(handle, input)
    if len(explanation.scores) != prepared.n:
        raise InputError(f"the explanation has {len(explanation.scores)} positions but the model input {prepared.n}")
    probs = prepared.probabilities(torch.ones(1, prepared.n, dtype=torch.bool))[0]
    target = int(probs.argmax())
    vectors = [torch.as_tensor(np.asarray(explanation.scores, dtype=np.float64))]
    vectors += [torch.rand(prepared.n, generator=torch.Generator().manual_seed(s), dtype=torch.float64)
                for s in range(seeds)]
    curves = perturbation_curves_many(prepared.probabilities, vectors, prepared.removable, target=target)
    random = np.array([c.auc["deletion"] for c in curves[1:]])
    labels = handle.labels or []
    return DeletionCheck(float(curves[0].auc["deletion"]), float(random.mean()), float(random.std()), seeds,
                         labels[target] if target < len(labels) else str(target))
