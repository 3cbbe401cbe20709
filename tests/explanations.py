"""The one factory tests build `Explanation`s with (by hand, without a model).

Every required field gets a consistent default, so a test names only what it is about, and a new field of
`ExplanationData` needs a default here once instead of in every test.
"""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from rollout_core.explanation import Explanation


def make_explanation(tokens: Sequence[str] | None = None, scores: Sequence[float] | np.ndarray | None = None, *,
                     grid: tuple[int, int] | None = None, layers: int = 1, **fields: Any) -> Explanation:
    """An explanation of `tokens` with final `scores` (one per position).

    Defaults: a text explanation by "rollout" of model "m"; `special` marks "[X]", "<s>" and "</s>"; every one of
    `layers` layers has the final scores as its cumulative and raw row; no matrix; zero per-layer attention; empty
    settings; target "row of [CLS]". With `grid` (rows, cols) it is an image: the last rows*cols positions are the
    patches, row-major ("patch r,c" unless `tokens` are given), any before them "[CLS]". `fields` override any field.
    """
    scores = np.asarray(scores, dtype=np.float64)
    n = len(scores)
    if grid is not None:
        patches = grid[0] * grid[1]
        if tokens is None:
            tokens = ["[CLS]"] * (n - patches) + [f"patch {r},{c}" for r in range(grid[0]) for c in range(grid[1])]
        fields = {"kind": "image", "grid": grid, "patch_positions": np.arange(n - patches, n), **fields}
    tokens = list(tokens)
    assert len(tokens) == n, "one score per token"
    defaults = dict(
        kind="text", method="rollout", model_name="m", tokens=tokens,
        special=np.array([(t.startswith("[") and t.endswith("]")) or t in ("<s>", "</s>") for t in tokens]),
        scores=scores, layer_scores=np.tile(scores, (layers, 1)), layer_attention_scores=np.tile(scores, (layers, 1)),
        matrix=None, layer_attention=np.zeros((layers, n, n)), settings={}, target_description="row of [CLS]",
    )
    return Explanation(**{**defaults, **fields})
