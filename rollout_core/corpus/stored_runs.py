"""A finished corpus run as stored: its Parquet files, their row counts, its manifest; read in pieces.

A run's files are the chunks its journal records (`folder.recorded_chunks`, each checked against its recorded
size); folders written by the Ray Data engine of earlier versions hold `*.parquet` files and no manifest. Both are
read by column and by file, so nothing here holds a whole run.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

import pyarrow as pa
import pyarrow.parquet as pq

from rollout_core.corpus.engine import SCHEMA
from rollout_core.corpus.folder import MANIFEST, recorded_chunks
from rollout_core.errors import InputError


@dataclass(frozen=True)
class StoredRun:
    """One run's folder: its files in reading order with their row counts, and its manifest (None: Ray run)."""

    folder: Path
    files: tuple[Path, ...]
    rows_per_file: tuple[int, ...]
    manifest: dict[str, Any] | None

    @property
    def rows(self) -> int:
        return sum(self.rows_per_file)

    def describe(self) -> str:
        """'default-text · rollout' from the manifest, or what is known without one."""
        if self.manifest is None:
            return "model and method not recorded (a Ray run keeps no manifest)"
        facts = [str(self.manifest.get("model", "?")), str(self.manifest.get("method", "?"))]
        if self.manifest.get("precision", "float32") != "float32":
            facts.append(str(self.manifest["precision"]))
        return " · ".join(facts)


def open_run(folder: str | Path, name: str = "run") -> StoredRun:
    """The stored run in `folder`; InputError naming `name` when it is not a readable result folder."""
    path = Path(folder)
    if not path.is_dir():
        raise InputError(f"{name}: no such result folder: {path}")
    manifest = None
    if (path / MANIFEST).is_file():
        try:
            manifest = json.loads((path / MANIFEST).read_text(encoding="utf-8"))
        except (ValueError, OSError) as err:
            raise InputError(f"{name}: {path / MANIFEST} is damaged ({err})") from err
        if not isinstance(manifest, dict):
            raise InputError(f"{name}: {path / MANIFEST} is not a manifest")
    if manifest is not None:  # the chunks the journal records as whole, in the order they were written
        recorded = recorded_chunks(path)
        files, sizes = tuple(path / c.name for c in recorded), [c.size for c in recorded]
    else:
        files = tuple(sorted(path.glob("*.parquet")))
        sizes = [None] * len(files)
    if not files:
        raise InputError(f"{name}: {path} holds no result chunks (write one with `rollout corpus --out {path}`)")
    counts = []
    for file, size in zip(files, sizes):
        try:
            if size is not None and file.stat().st_size != size:
                raise OSError("its size is not the recorded one")
            stored = pq.ParquetFile(file)
        except (pa.ArrowInvalid, OSError) as err:
            raise InputError(f"{name}: {file} is missing or damaged ({getattr(err, 'strerror', None) or err}); "
                             f"rerun the corpus command into {path} to explain its rows again") from None
        names = set(stored.schema_arrow.names)
        missing = [c for c in SCHEMA.names if c not in names]
        if missing:
            raise InputError(f"{name}: {file} is not a result chunk (no {', '.join(missing)} column)")
        counts.append(stored.metadata.num_rows)
    return StoredRun(path, files, tuple(counts), manifest)


def read_file(path: Path, columns: Sequence[str]) -> pa.Table:
    """The `columns` of one stored file, cast to the result schema's types (Ray writes some as large types)."""
    table = pq.ParquetFile(path).read(columns=list(columns))
    return table.cast(pa.schema([SCHEMA.field(c) for c in columns]))
