"""Ray engine: ray.data rows -> map_batches on an actor pool (model loaded once per actor) -> Parquet.

Gives the same rows as `engine.run_local` (same `explain_rows`). Ray is optional: `pip install "rollout-dashboard[ray]"`.
Point it at a cluster with RAY_ADDRESS (ray.init picks it up) or pass `address=`.
"""
from __future__ import annotations

from pathlib import Path

import pandas as pd
import pyarrow as pa

from rollout_core.errors import InputError
from rollout_core.extras import require


class _Explainer:
    """Ray actor: loads the model once, then explains pandas batches."""

    def __init__(self, model_name: str, method: str, batch_size: int, top_k: int) -> None:
        import torch

        from rollout_core.models.loading import load_model

        torch.set_num_threads(1)
        self.model, self.method, self.batch_size, self.top_k = load_model(model_name), method, batch_size, top_k

    def __call__(self, batch: pd.DataFrame) -> pa.Table:
        from rollout_core.corpus.engine import explain_rows

        return explain_rows(self.model, batch, self.method, self.batch_size, self.top_k)  # Arrow: lists stay typed


def run_ray(model_name: str, corpus: pd.DataFrame, out_dir: str | Path, *, method: str = "rollout",
            batch_size: int = 16, workers: int = 2, top_k: int = 5, address: str | None = None) -> Path:
    """Explain `corpus` on Ray with `workers` actors; writes Parquet files into `out_dir`."""
    ray = require("ray", "ray")
    if not ray.is_initialized():
        ray.init(address=address, include_dashboard=False)
    out = Path(out_dir)
    # blocks cut here, not by `repartition`: that is a task of its own, which waits for a CPU the actors hold
    frame = corpus.reset_index(drop=True)
    step = max(batch_size, -(-len(frame) // max(workers, 1)))
    dataset = ray.data.from_pandas([frame.iloc[i:i + step] for i in range(0, len(frame), step)] or [frame])
    dataset = dataset.map_batches(_Explainer, fn_constructor_args=(str(model_name), method, batch_size, top_k),
                                  batch_size=batch_size, batch_format="pandas",
                                  compute=ray.data.ActorPoolStrategy(size=workers), num_cpus=1)
    # the actors hold one CPU each; the write tasks must not wait for a CPU the actors never give back
    dataset.write_parquet(str(out), ray_remote_args={"num_cpus": 0})
    return out


def read_ray_results(out_dir: str | Path) -> pd.DataFrame:
    """All rows Ray wrote into `out_dir`."""
    files = sorted(Path(out_dir).glob("*.parquet"))
    if not files:
        raise InputError(f"{out_dir} holds no Parquet files")
    import pyarrow.parquet as pq

    from rollout_core.corpus.engine import SCHEMA

    tables = [pq.read_table(f, columns=SCHEMA.names).cast(SCHEMA) for f in files]
    return pa.concat_tables(tables).to_pandas()
