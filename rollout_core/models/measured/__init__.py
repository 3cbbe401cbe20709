"""Measured faithfulness of the methods on registry models, and the default method it implies.

`python -m rollout_core evaluate --model <registry name> ... --record` writes `<model>.json` in this folder
(`record`): per method the mean pointing game, deletion AUC, insertion AUC and mass share, the random baseline,
the data set, the number of examples, the command and the date. `default_method(model, registered)` reads that
file and picks the method best on pointing game, then on deletion AUC (lower is better), among the methods the
caller names (the registered ones: `rollout_core.methods.names()`, passed in, since the records sit below the method
registry); a model without a file (or without any of those methods in it) falls back to `FALLBACK`.
"""
from __future__ import annotations

import datetime
import json
import math
import re
from pathlib import Path
from typing import Any, Sequence

MEASURED_DIR = Path(__file__).resolve().parent
"""Where the records live (read at call time, so tests can point it elsewhere)."""
FALLBACK = "rollout"
FIGURES = ("pointing_game", "deletion_auc", "insertion_auc", "mass_share")
DATASET_WORDS = {"text": ("generated sentences", "with known deciding words"),
                 "image": ("generated shapes", "with known deciding regions"),
                 "photos": ("scikit-image photos", "with hand-drawn object boxes")}
RANKED_BY = (("pointing_game", "higher"), ("deletion_auc", "lower"))
"""How methods are ranked when a record does not say (`ranked_by`)."""
_SAFE_NAME = re.compile(r"[^A-Za-z0-9._-]+")


def path_for(model: str) -> Path:
    """The record file of a registry model name."""
    return MEASURED_DIR / f"{_SAFE_NAME.sub('_', model)}.json"


def record(model: str, summary: Any, *, dataset: str, examples: int, accuracy: float, command: str,
           seeds: int) -> Path:
    """Write the per-method means of an evaluate summary (index method, columns (measure, "mean"|"std"))."""
    def row(method: str) -> dict[str, float | None]:
        return {m: _number(summary.loc[method, (m, "mean")]) for m in FIGURES}

    methods = [m for m in summary.index if m != "random"]
    data = {
        "model": model, "dataset": dataset, "examples": int(examples), "accuracy": _number(accuracy),
        "command": command, "date": datetime.date.today().isoformat(), "random_seeds": int(seeds),
        "methods": {m: row(m) for m in methods},
        "random": row("random") if "random" in summary.index else None,
    }
    path = path_for(model)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
    return path


def figures(model: str | None) -> dict[str, Any] | None:
    """The record of `model` (see the module doc), or None when it has none or it cannot be read."""
    if not model:
        return None
    path = path_for(model)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) and isinstance(data.get("methods"), dict) else None


def ranked_by(data: dict[str, Any]) -> list[tuple[str, str]]:
    """The measures a record ranks its methods by, each with "higher" or "lower" (better): its own `ranked_by`
    (a study with other measures, e.g. the photo boxes' mass lift), else `RANKED_BY`."""
    given = data.get("ranked_by")
    if isinstance(given, list) and given and all(isinstance(r, list) and len(r) == 2 and r[1] in ("higher", "lower")
                                                 for r in given):
        return [(str(m), str(d)) for m, d in given]
    return list(RANKED_BY)


def ranking(data: dict[str, Any], allowed: tuple[str, ...] | None = None) -> list[str]:
    """Methods of a record, best first by `ranked_by` (default: higher pointing game, then lower deletion AUC;
    missing = worst)."""
    order = ranked_by(data)

    def key(item: tuple[str, dict[str, Any]]) -> tuple[float, ...]:
        values = item[1] if isinstance(item[1], dict) else {}
        return tuple((-v if better == "higher" else v) if _finite(v := values.get(m)) else math.inf
                     for m, better in order)

    items = [(m, v) for m, v in data.get("methods", {}).items() if allowed is None or m in allowed]
    return [m for m, _ in sorted(items, key=key)]


def default_method(model: str | None, registered: Sequence[str]) -> str:
    """The measured best of the `registered` methods on `model`; `FALLBACK` without a usable record."""
    data = figures(model)
    best = ranking(data, tuple(registered)) if data else []
    return best[0] if best else FALLBACK


def describe_dataset(data: dict[str, Any], long: bool = True) -> str:
    """'100 generated sentences with known deciding words' ('100 generated sentences' when not `long`), or
    'N examples of <name>' for a user data set."""
    noun, truth = DATASET_WORDS.get(data.get("dataset"), ("examples of " + str(data.get("dataset")), ""))
    return f"{data.get('examples')} {noun} {truth if long else ''}".strip()


def _finite(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _number(value: Any) -> float | None:
    """JSON has no NaN: missing measures (no ground truth) are stored as null."""
    value = float(value)
    return value if math.isfinite(value) else None
