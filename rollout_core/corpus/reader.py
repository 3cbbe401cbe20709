"""Read a corpus of texts (CSV / JSONL / Parquet) into (id, text, label) rows."""
from __future__ import annotations

from pathlib import Path

import pandas as pd

from rollout_core.errors import InputError


def read_corpus(path: str | Path, text_column: str = "text", label_column: str | None = "label") -> pd.DataFrame:
    """A frame with columns id (str), text (str) and label (str or None), from a .csv/.jsonl/.parquet file."""
    path = Path(path)
    if not path.is_file():
        raise InputError(f"no such corpus file: {path}")
    suffix = path.suffix.lower()
    try:
        if suffix == ".csv":
            frame = pd.read_csv(path)
        elif suffix in (".jsonl", ".ndjson"):
            frame = pd.read_json(path, lines=True)
        elif suffix == ".parquet":
            frame = pd.read_parquet(path)
        else:
            raise InputError(f"unsupported corpus format {suffix!r}: use .csv, .jsonl or .parquet")
    except (ValueError, pd.errors.ParserError, OSError) as err:
        raise InputError(f"cannot read {path}: {err}") from err
    if text_column not in frame.columns:
        raise InputError(f"{path} has no {text_column!r} column (columns: {', '.join(map(str, frame.columns))})")
    out = pd.DataFrame({"text": frame[text_column].astype(str)})
    out["id"] = frame["id"].astype(str) if "id" in frame.columns else [str(i) for i in range(len(frame))]
    if out["id"].duplicated().any():
        raise InputError(f"{path}: the id column has duplicates")
    has_label = label_column is not None and label_column in frame.columns
    out["label"] = frame[label_column].astype(str) if has_label else None
    return out[["id", "text", "label"]].reset_index(drop=True)
