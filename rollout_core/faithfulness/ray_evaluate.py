"""A data-set evaluation on Ray: examples split over an actor pool that loads the model once per actor.

The actors compute exactly the local engine's per-example rows (`evaluate.item_rows`, with each example's own
index, so its random orderings are the same), so the summary equals the local one. Ray is optional
(`pip install ".[ray]"`); RAY_ADDRESS points it at a cluster, as for the corpus engine.
"""
from __future__ import annotations

from typing import Any, Sequence

from rollout_core.errors import InputError
from rollout_core.extras import require


class _Evaluator:
    """Ray actor: one model, many examples."""

    def __init__(self, model_name: str, methods: list[str], seeds: int, options: dict[str, Any],
                 references: tuple[str, ...]) -> None:
        import torch

        from rollout_core.models.loading import load_model

        torch.set_num_threads(1)
        self.handle, self.args = load_model(model_name), (methods, seeds, options, references)

    def rows(self, jobs: list[tuple[int, Any]]) -> list[dict[str, Any]]:
        from rollout_core.faithfulness.evaluate import item_rows

        out: list[dict[str, Any]] = []
        for index, item in jobs:
            out.extend(item_rows(self.handle, index, item, *self.args))
        return out


def evaluate_on_ray(model_name: str | Any, items: Sequence[Any], methods: list[str], seeds: int,
                    options: dict[str, Any], references: tuple[str, ...], *, workers: int = 2,
                    progress: Any = None) -> list[dict[str, Any]]:
    """Every example's rows, computed by `workers` actors (round-robin), in example order."""
    ray = require("ray", "ray")
    if workers < 1:
        raise InputError("workers must be >= 1")
    if not ray.is_initialized():
        ray.init(include_dashboard=False)
    actor = ray.remote(num_cpus=1)(_Evaluator)
    pool = [actor.remote(str(model_name), list(methods), seeds, dict(options), tuple(references)) for _ in range(workers)]
    jobs = list(enumerate(items))
    pending = {pool[w].rows.remote(jobs[w::workers]): w for w in range(min(workers, len(jobs)))}
    if progress is not None:
        progress(0, len(items))
    rows: list[dict[str, Any]] = []
    done = 0
    while pending:
        ready, _ = ray.wait(list(pending))
        for ref in ready:
            part = ray.get(ref)
            rows.extend(part)
            done += len({r["example"] for r in part})
            pending.pop(ref)
        if progress is not None:
            progress(done, len(items))
    return sorted(rows, key=lambda r: r["example"])
