"""Local engine: explain a corpus in batches, one Parquet chunk per batch, resumable.

Each chunk is written to a temporary name and renamed into place, so a crash or Ctrl-C leaves only
whole chunks; a rerun skips every id already present in a chunk.
"""
from __future__ import annotations

import os
import sys
import time
from pathlib import Path
from typing import Any, Callable

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from rollout_core.compare import word_scores
from rollout_core.errors import InputError
from rollout_core.explain import explain_texts

SCHEMA = pa.schema([
    ("id", pa.string()), ("text", pa.string()), ("label", pa.string()), ("prediction", pa.string()),
    ("words", pa.list_(pa.string())), ("starts", pa.list_(pa.int32())), ("ends", pa.list_(pa.int32())),
    ("scores", pa.list_(pa.float32())),
])


def explain_rows(model: Any, rows: pd.DataFrame, method: str, batch_size: int) -> pa.Table:
    """Explain `rows` (id, text, label) and return one output row per input row (SCHEMA)."""
    expls = explain_texts(model, list(rows["text"]), method=method, batch_size=batch_size)
    out: dict[str, list] = {name: [] for name in SCHEMA.names}
    for (_, row), expl in zip(rows.iterrows(), expls):
        spans = word_scores(expl)
        out["id"].append(str(row["id"]))
        out["text"].append(str(row["text"]))
        out["label"].append(None if row["label"] is None or pd.isna(row["label"]) else str(row["label"]))
        out["prediction"].append(expl.prediction[0].label if expl.prediction else None)
        out["words"].append([w for w, _, _, _ in spans])
        out["starts"].append([s for _, s, _, _ in spans])
        out["ends"].append([e for _, _, e, _ in spans])
        out["scores"].append([v for _, _, _, v in spans])
    return pa.Table.from_pydict(out, schema=SCHEMA)


def done_ids(out_dir: Path) -> set[str]:
    """Ids already written in whole chunks of `out_dir`."""
    ids: set[str] = set()
    for chunk in sorted(out_dir.glob("chunk-*.parquet")):
        ids.update(pq.read_table(chunk, columns=["id"]).column("id").to_pylist())
    return ids


def _write_chunk(table: pa.Table, out_dir: Path, index: int) -> None:
    final = out_dir / f"chunk-{index:06d}.parquet"
    tmp = out_dir / f".chunk-{index:06d}.parquet.tmp"
    pq.write_table(table, tmp)
    os.replace(tmp, final)


def run_local(model: Any, corpus: pd.DataFrame, out_dir: str | Path, *, method: str = "rollout",
              batch_size: int = 16, chunk_rows: int = 256,
              progress: Callable[[str], None] | None = None) -> Path:
    """Explain every row of `corpus` not yet in `out_dir` into Parquet chunks; returns `out_dir`."""
    if batch_size < 1 or chunk_rows < 1:
        raise InputError("batch_size and chunk_rows must be >= 1")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    for stale in out.glob(".chunk-*.tmp"):
        stale.unlink()
    todo = corpus[~corpus["id"].isin(done_ids(out))]
    index = len(list(out.glob("chunk-*.parquet")))
    say = progress or (lambda msg: print(msg, file=sys.stderr))
    start, done = time.monotonic(), 0
    for first in range(0, len(todo), chunk_rows):
        part = todo.iloc[first:first + chunk_rows]
        _write_chunk(explain_rows(model, part, method, batch_size), out, index)
        index += 1
        done += len(part)
        rate = done / max(time.monotonic() - start, 1e-9)
        eta = (len(todo) - done) / rate
        say(f"{done}/{len(todo)} rows  {rate:.1f} rows/s  ETA {eta:.0f}s")
    return out


def read_results(out_dir: str | Path) -> pd.DataFrame:
    """All rows of a result folder as one frame."""
    out = Path(out_dir)
    chunks = sorted(out.glob("chunk-*.parquet"))
    if not chunks:
        raise InputError(f"{out} holds no result chunks")
    return pa.concat_tables([pq.read_table(c) for c in chunks]).to_pandas()
