"""Two runs' rows of the same ids, compared: the per-item work of `compare_runs`, mergeable across items.

Words are matched by their character span: both runs split the same (normalised) text into the same words
(`compare.words`) whatever their tokenizers, and a word a model did not see (its text was cut at the model's
length) is in that run's row no more, or with another span; so the words both saw are the spans both rows hold.
Patches are matched by grid cell; when the two grids differ the coarser map is resampled onto the finer
(`compare.resample_maps`), as the Compare page does. Each side's shares are renormalised over the units both see.

Everything summed over rows is kept in fixed point (`bootstrap.FIXED`), so merging items in any grouping and
order gives the same figures to the bit.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from rollout_core.compare import resample_maps
from rollout_core.corpus import ragged
from rollout_core.corpus.bootstrap import poisson_weights, row_keys, to_fixed
from rollout_core.errors import InputError

COLUMNS = ("id", "kind", "text", "label", "prediction", "probability", "words", "starts", "ends", "scores")
GROUPINGS = {"prediction_a": "A's prediction", "prediction_b": "B's prediction", "label": "the data's label"}
NO_CLASS = "(none)"
PATCH = re.compile(r"^patch (\d+),(\d+)$")
CELL = 1 << 20  # an image unit's key: row * CELL + column


@dataclass(frozen=True)
class Settings:
    """How rows are compared and grouped (picklable: sent to Ray tasks as is)."""

    by: str = "prediction_a"  # a key of GROUPINGS: the class a row counts under
    k: int = 5  # top-k overlap
    examples: int = 10  # rows kept per kind of disagreement


@dataclass
class Part:
    """What an item contributes: one figure row per example, per (class, unit) fixed-point sums, and the rows
    that may be among the most disagreeing (with what their highlights need)."""

    rows: pd.DataFrame
    units: pd.DataFrame  # class, unit, count, sum_a, sum_b (int64, fixed point)
    candidates: dict[str, pd.DataFrame] = field(default_factory=dict)


ROW_COLUMNS = ["position", "id", "class", "label", "prediction_a", "prediction_b", "probability_a",
               "probability_b", "agree", "spearman", "top_k_overlap", "units", "units_a", "units_b"]
UNIT_COLUMNS = ["class", "unit", "count", "sum_a", "sum_b"]
KINDS = {"explanations_differ": "predictions agree, explanations differ most",
         "predictions_differ": "predictions differ, explanations agree most"}


def _joined(a: pa.Table, b: pa.Table) -> tuple[pa.Table, pa.Table]:
    """Both tables in one row order (by id); InputError if they do not hold the same ids."""
    a = a.take(pc.sort_indices(a, [("id", "ascending")]))
    b = b.take(pc.sort_indices(b, [("id", "ascending")]))
    if not a.column("id").equals(b.column("id")):
        raise InputError("the two runs do not hold the same ids in this part (was a run written to while "
                         "being compared?)")
    return a, b


def _flat(table: pa.Table, column: str) -> np.ndarray:
    return pc.list_flatten(table.column(column)).to_numpy(zero_copy_only=False)


def _lengths(table: pa.Table) -> np.ndarray:
    return pc.list_value_length(table.column("words")).to_numpy(zero_copy_only=False).astype(np.int64)


def _text_units(a: pa.Table, b: pa.Table) -> pd.DataFrame:
    """row, unit (lower-cased word), a, b: the words both rows hold (same span), in text order."""
    sides = []
    for table in (a, b):
        sides.append(pd.DataFrame({
            "row": np.repeat(np.arange(len(table)), _lengths(table)), "start": _flat(table, "starts"),
            "end": _flat(table, "ends"), "word": _flat(table, "words"),
            "share": _flat(table, "scores").astype(np.float64)}))
    both = sides[0].merge(sides[1].drop(columns="word"), on=["row", "start", "end"], suffixes=("_a", "_b"))
    both = both.sort_values(["row", "start"], kind="stable")
    return pd.DataFrame({"row": both["row"].to_numpy(), "unit": both["word"].str.lower().to_numpy(),
                         "a": both["share_a"].to_numpy(), "b": both["share_b"].to_numpy()})


def _grids(table: pa.Table) -> np.ndarray:
    """(rows, 2) patch grid of each image row, read from its last unit ("patch r,c"); row-major order checked."""
    lengths = _lengths(table)
    words = pc.list_flatten(table.column("words")).to_pylist()
    ends = np.cumsum(lengths)
    grids = np.zeros((len(table), 2), dtype=np.int64)
    for i, (end, n) in enumerate(zip(ends, lengths)):
        if n == 0:
            continue
        first, last = PATCH.match(str(words[end - n])), PATCH.match(str(words[end - 1]))
        if not (first and last) or first.groups() != ("0", "0"):
            raise InputError(f"row {table.column('id')[i]} of an image run does not hold patches 'patch r,c'")
        grids[i] = int(last.group(1)) + 1, int(last.group(2)) + 1
        if grids[i, 0] * grids[i, 1] != n:
            raise InputError(f"row {table.column('id')[i]} of an image run holds {n} patches, not a full grid")
    return grids


def _image_units(a: pa.Table, b: pa.Table) -> pd.DataFrame:
    """row, unit (row * CELL + column of the grid cell), a, b: both maps on the finer grid of the two."""
    grid_a, grid_b = _grids(a), _grids(b)
    values_a, values_b = _flat(a, "scores").astype(np.float64), _flat(b, "scores").astype(np.float64)
    start_a = np.concatenate([[0], np.cumsum(grid_a.prod(1))])
    start_b = np.concatenate([[0], np.cumsum(grid_b.prod(1))])
    pieces = []
    pairs = np.concatenate([grid_a, grid_b], axis=1)
    for pair in np.unique(pairs, axis=0):
        rows = np.flatnonzero((pairs == pair).all(1))
        (ha, wa), (hb, wb) = pair[:2], pair[2:]
        if ha * wa == 0 or hb * wb == 0:
            continue
        maps_a = np.stack([values_a[start_a[r]:start_a[r + 1]].reshape(ha, wa) for r in rows])
        maps_b = np.stack([values_b[start_b[r]:start_b[r + 1]].reshape(hb, wb) for r in rows])
        grid = (max(ha, hb), max(wa, wb))
        if (ha, wa) != grid:
            maps_a = resample_maps(maps_a, grid)
        if (hb, wb) != grid:
            maps_b = resample_maps(maps_b, grid)
        cells = np.arange(grid[0] * grid[1])
        pieces.append(pd.DataFrame({
            "row": np.repeat(rows, len(cells)),
            "unit": np.tile((cells // grid[1]) * CELL + cells % grid[1], len(rows)),
            "a": maps_a.reshape(-1), "b": maps_b.reshape(-1)}))
    if not pieces:
        return pd.DataFrame({"row": np.zeros(0, np.int64), "unit": np.zeros(0, np.int64), "a": [], "b": []})
    return pd.concat(pieces, ignore_index=True).sort_values(["row", "unit"], kind="stable", ignore_index=True)


def patch_name(code: int) -> str:
    """An image unit key as its display name, 'patch r,c'."""
    return f"patch {int(code) // CELL},{int(code) % CELL}"


def patch_code(name: str) -> int:
    """'patch r,c' as an image unit key."""
    match = PATCH.match(name)
    if match is None:
        raise ValueError(f"not a patch name: {name!r}")
    return int(match.group(1)) * CELL + int(match.group(2))


def common_units(a: pa.Table, b: pa.Table) -> tuple[pa.Table, pa.Table, pd.DataFrame]:
    """The two tables in one row order and their units both see, each side renormalised over them (sum 1)."""
    a, b = _joined(a, b)
    kinds = set(a.column("kind").to_pylist()) | set(b.column("kind").to_pylist())
    if len(kinds) > 1:
        raise InputError("one run holds text rows and the other image rows: they cannot be compared")
    units = _image_units(a, b) if kinds == {"image"} else _text_units(a, b)
    rows = np.asarray(units["row"], dtype=np.int64)
    for side in ("a", "b"):
        totals = np.bincount(rows, units[side].to_numpy(), len(a))[rows]
        units[side] = np.divide(units[side].to_numpy(), totals, out=units[side].to_numpy().copy(), where=totals > 0)
    return a, b, units


def _classes(a: pa.Table, b: pa.Table, by: str) -> np.ndarray:
    if by not in GROUPINGS:
        raise InputError(f"rows are grouped by one of {', '.join(GROUPINGS)}, not {by!r}")
    source = {"prediction_a": a.column("prediction"), "prediction_b": b.column("prediction"),
              "label": a.column("label")}[by]
    return np.array([NO_CLASS if v is None else str(v) for v in source.to_pylist()], dtype=object)


def compare_part(a: pa.Table, b: pa.Table, settings: Settings, positions: np.ndarray | None = None) -> Part:
    """Compare the rows of `a` and `b` (same ids, any order; COLUMNS); `positions`: each row of `a`'s place in its
    run (kept to give the rows back in that order), by default its place in `a`."""
    if positions is not None:
        a = a.append_column("_position", pa.array(np.asarray(positions, dtype=np.int64)))
    a, b, units = common_units(a, b)
    n = len(a)
    position = a.column("_position").to_numpy() if positions is not None else np.arange(n)
    row = units["row"].to_numpy()
    classes = _classes(a, b, settings.by)
    pred_a, pred_b = a.column("prediction").to_pylist(), b.column("prediction").to_pylist()
    rows = pd.DataFrame({
        "position": position, "id": a.column("id").to_pylist(), "class": classes, "label": a.column("label").to_pylist(),
        "prediction_a": pred_a, "prediction_b": pred_b,
        "probability_a": a.column("probability").to_numpy(zero_copy_only=False).astype(np.float64),
        "probability_b": b.column("probability").to_numpy(zero_copy_only=False).astype(np.float64),
        "agree": [x == y for x, y in zip(pred_a, pred_b)],
        "spearman": ragged.spearman_rows(row, units["a"].to_numpy(), units["b"].to_numpy(), n),
        "top_k_overlap": ragged.top_k_overlap_rows(row, units["a"].to_numpy(), units["b"].to_numpy(), settings.k, n),
        "units": np.bincount(row, minlength=n), "units_a": _lengths(a), "units_b": _lengths(b)})
    sums = pd.DataFrame({"class": classes[row], "unit": units["unit"].to_numpy(), "count": 1,
                         "sum_a": to_fixed(units["a"].to_numpy()), "sum_b": to_fixed(units["b"].to_numpy())})
    grouped = sums.groupby(["class", "unit"], sort=False).sum().reset_index()
    if len(grouped) and a.column("kind")[0].as_py() == "image":
        grouped["unit"] = grouped["unit"].map(patch_name)
    return Part(rows[ROW_COLUMNS], grouped[UNIT_COLUMNS], _candidates(rows, a, b, settings.examples))


def _candidates(rows: pd.DataFrame, a: pa.Table, b: pa.Table, keep: int) -> dict[str, pd.DataFrame]:
    """The rows that may be among the `keep` most disagreeing of each kind, with both sides' stored units."""
    defined = rows["spearman"].notna()
    kind = a.column("kind")[0].as_py() if len(a) else "text"
    out = {}
    for name, mask, ascending in (("explanations_differ", rows["agree"] & defined, True),
                                  ("predictions_differ", ~rows["agree"] & defined, False)):
        chosen = pick(rows[mask], keep, ascending)
        taken = pa.array(chosen.index.to_numpy(), type=pa.int64())
        extra: dict[str, list[Any]] = {"text": a.take(taken).column("text").to_pylist(), "kind": [kind] * len(chosen)}
        for side, table in (("a", a), ("b", b)):
            for column in ("words", "starts", "ends", "scores"):
                extra[f"{column}_{side}"] = table.take(taken).column(column).to_pylist()
        out[name] = chosen.assign(**extra)
    return out


def pick(rows: pd.DataFrame, keep: int, ascending: bool) -> pd.DataFrame:
    """The `keep` rows of lowest (`ascending`) or highest Spearman, ties by id: the same rows however the rows
    were split into items."""
    order = rows.assign(_key=rows["spearman"] if ascending else -rows["spearman"])
    return order.sort_values(["_key", "id"], kind="stable").head(keep).drop(columns="_key")


def replicate_part(a: pa.Table, b: pa.Table, settings: Settings, selected: pd.DataFrame, replicates: int,
                   seed: int) -> pd.DataFrame:
    """Per selected (class, unit): each bootstrap replicate's weighted sum of B - A (fixed point) and weighted
    occurrence count over these rows; columns class, unit, num (replicates,), den (replicates,)."""
    a, b, units = common_units(a, b)
    classes = _classes(a, b, settings.by)
    wanted = selected[["class", "unit"]]
    if len(a) and a.column("kind")[0].as_py() == "image":
        wanted = wanted.assign(unit=wanted["unit"].map(patch_code))
    flat = pd.DataFrame({"row": units["row"].to_numpy(), "class": classes[units["row"].to_numpy()],
                         "unit": units["unit"].to_numpy(),
                         "diff": to_fixed(units["b"].to_numpy()) - to_fixed(units["a"].to_numpy())})
    flat = flat.merge(wanted, on=["class", "unit"])
    per_row = flat.groupby(["class", "unit", "row"], sort=True).agg(diff=("diff", "sum"), n=("diff", "size"))
    per_row = per_row.reset_index()
    involved = np.unique(per_row["row"].to_numpy())
    ids = a.column("id").to_pylist()
    weights = poisson_weights(row_keys([ids[r] for r in involved]), replicates, seed)
    out: dict[str, list[Any]] = {"class": [], "unit": [], "num": [], "den": []}
    for (cls, unit), group in per_row.groupby(["class", "unit"], sort=True):
        w = weights[np.searchsorted(involved, group["row"].to_numpy())]
        out["class"].append(cls)
        out["unit"].append(patch_name(unit) if isinstance(unit, (int, np.integer)) else unit)
        out["num"].append(group["diff"].to_numpy(dtype=np.int64) @ w)
        out["den"].append(group["n"].to_numpy(dtype=np.int64) @ w)
    return pd.DataFrame(out, columns=["class", "unit", "num", "den"])
