"""Read a corpus into rows: (id, text, label) for texts, (id, image, label) for images.

Sources: a .csv / .jsonl / .parquet file with a text column; a folder saved by Hugging Face `datasets`
(`save_to_disk`: Arrow stream files and a dataset_info.json; read with pyarrow, so `datasets` itself is not needed);
an image-folder tree (`root/<class>/<image>`, the class folder is the label). `image` holds a file path or the
image's bytes, decoded only when the row is explained.
"""
from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.ipc as ipc

from rollout_core.errors import InputError

IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".webp", ".bmp", ".gif")


def read_corpus(path: str | Path, text_column: str = "text", label_column: str | None = "label",
                limit: int | None = None) -> pd.DataFrame:
    """The rows of a corpus file or folder (see the module docstring), the first `limit` if given."""
    path = Path(path)
    if limit is not None and limit < 1:
        raise InputError("limit must be >= 1")
    if path.is_dir():
        if (path / "dataset_info.json").is_file() or (path / "dataset_dict.json").is_file():
            frame = _saved_dataset(path)
        else:
            return _image_folder(path, limit)
    elif path.is_file():
        frame = _table_file(path)
    else:
        raise InputError(f"no such corpus file or folder: {path}")
    if limit is not None:
        frame = frame.head(limit)
    return _rows(frame, path, text_column, label_column)


def _table_file(path: Path) -> pd.DataFrame:
    suffix = path.suffix.lower()
    # CSV cells are all text (a text column of numbers stays text); only an empty cell is missing
    readers = {".csv": lambda p: pd.read_csv(p, dtype=str, keep_default_na=False, na_values=[""]),
               ".jsonl": lambda p: pd.read_json(p, lines=True), ".ndjson": lambda p: pd.read_json(p, lines=True),
               ".parquet": pd.read_parquet}
    if suffix not in readers:
        raise InputError(f"unsupported corpus format {suffix!r}: use .csv, .jsonl, .parquet, a folder saved with "
                         "datasets' save_to_disk, or an image folder")
    try:
        return readers[suffix](path)
    except (ValueError, pd.errors.ParserError, OSError) as err:
        raise InputError(f"cannot read {path}: {err}") from err


def _saved_dataset(path: Path) -> pd.DataFrame:
    """A `save_to_disk` folder (one split; a DatasetDict gives its first split, or its "train" split)."""
    if (path / "dataset_dict.json").is_file():
        splits = _json(path / "dataset_dict.json").get("splits") or []
        if not splits:
            raise InputError(f"{path}: dataset_dict.json lists no splits")
        return _saved_dataset(path / ("train" if "train" in splits else splits[0]))
    files = sorted(path.glob("data-*.arrow")) or sorted(path.glob("*.arrow"))
    if not files:
        raise InputError(f"{path}: no .arrow files (is this a datasets save_to_disk folder?)")
    try:
        table = pa.concat_tables([ipc.open_stream(f).read_all() for f in files])
    except (pa.ArrowInvalid, OSError) as err:
        raise InputError(f"cannot read {path}: {err}") from err
    frame = table.to_pandas()
    features = _json(path / "dataset_info.json").get("features") or {}
    for name, feature in features.items():
        if isinstance(feature, dict) and feature.get("_type") == "ClassLabel" and name in frame:
            names = feature.get("names") or []
            frame[name] = [names[i] if isinstance(i, int) and 0 <= i < len(names) else i for i in frame[name]]
        if isinstance(feature, dict) and feature.get("_type") == "Image" and name in frame:
            frame[name] = [cell.get("bytes") or cell.get("path") if isinstance(cell, dict) else cell
                           for cell in frame[name]]
    return frame


def _json(path: Path) -> dict:
    try:
        value = json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}
    except (ValueError, OSError) as err:
        raise InputError(f"cannot read {path}: {err}") from err
    return value if isinstance(value, dict) else {}


def _image_folder(root: Path, limit: int | None) -> pd.DataFrame:
    files = sorted(p for p in root.rglob("*") if p.is_file() and p.suffix.lower() in IMAGE_SUFFIXES)
    if not files:
        raise InputError(f"{root} holds no images ({', '.join(IMAGE_SUFFIXES)}) and is not a saved data set")
    files = files[:limit] if limit is not None else files
    ids = [p.relative_to(root).as_posix() for p in files]
    labels = [p.parent.name if p.parent != root else None for p in files]
    return pd.DataFrame({"id": ids, "image": [str(p) for p in files], "label": labels})


def _rows(frame: pd.DataFrame, path: Path, text_column: str, label_column: str | None) -> pd.DataFrame:
    content = text_column if text_column in frame.columns else "image" if "image" in frame.columns else None
    if content is None:
        raise InputError(f"{path} has no {text_column!r} column (columns: {', '.join(map(str, frame.columns))})")
    key = "text" if content == text_column else "image"
    out = pd.DataFrame({key: frame[content].astype(object)})  # missing and non-text cells are skipped later (cells)
    out["id"] = frame["id"].astype(str) if "id" in frame.columns else [str(i) for i in range(len(frame))]
    if out["id"].duplicated().any():
        raise InputError(f"{path}: the id column has duplicates")
    has_label = label_column is not None and label_column in frame.columns
    out["label"] = frame[label_column].astype(str) if has_label else None
    return out[["id", key, "label"]].reset_index(drop=True)
