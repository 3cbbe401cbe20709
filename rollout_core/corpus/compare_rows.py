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
REPLICATE_COLUMNS = ("id", "kind", "label", "prediction", "words", "starts", "ends", "scores")
"""What the bootstrap pass reads (not the texts: they are most of the bytes)."""
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

    rows: pa.Table  # ROW_COLUMNS
    units: pa.Table  # UNIT_COLUMNS: class, unit, count, sum_a, sum_b (int64, fixed point)
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


def _flat(table: pa.Table, column: str) -> pa.ChunkedArray:
    return pc.list_flatten(table.column(column))


def _lengths(table: pa.Table) -> np.ndarray:
    return pc.list_value_length(table.column("words")).to_numpy(zero_copy_only=False).astype(np.int64)


def _row_index(table: pa.Table) -> np.ndarray:
    """For each stored unit of `table`, its row."""
    return np.repeat(np.arange(len(table)), _lengths(table))


def _text_units(a: pa.Table, b: pa.Table) -> pa.Table:
    """row, unit (lower-cased word), a, b: the words both rows hold (same span), in text order."""
    left = pa.table({"row": _row_index(a), "start": _flat(a, "starts"), "end": _flat(a, "ends"),
                     "unit": pc.utf8_lower(_flat(a, "words")), "a": _flat(a, "scores").cast(pa.float64())})
    right = pa.table({"row": _row_index(b), "start": _flat(b, "starts"), "end": _flat(b, "ends"),
                      "b": _flat(b, "scores").cast(pa.float64())})
    both = left.join(right, keys=["row", "start", "end"], join_type="inner")
    return both.sort_by([("row", "ascending"), ("start", "ascending")]).select(["row", "unit", "a", "b"])


def _grids(table: pa.Table) -> np.ndarray:
    """(rows, 2) patch grid of each image row, read from its first and last unit ("patch 0,0" ... "patch r,c")."""
    lengths = _lengths(table)
    ends = np.cumsum(lengths)
    filled = np.flatnonzero(lengths > 0)
    flat = _flat(table, "words")
    firsts = flat.take(pa.array(ends[filled] - lengths[filled])).to_pylist()
    lasts = flat.take(pa.array(ends[filled] - 1)).to_pylist()
    grids = np.zeros((len(table), 2), dtype=np.int64)
    for i, first, last in zip(filled, firsts, lasts):
        head, tail = PATCH.match(str(first)), PATCH.match(str(last))
        if not (head and tail) or head.groups() != ("0", "0"):
            raise InputError(f"row {table.column('id')[i]} of an image run does not hold patches 'patch r,c'")
        grids[i] = int(tail.group(1)) + 1, int(tail.group(2)) + 1
        if grids[i, 0] * grids[i, 1] != lengths[i]:
            raise InputError(f"row {table.column('id')[i]} of an image run holds {lengths[i]} patches, not a full grid")
    return grids


def _image_units(a: pa.Table, b: pa.Table) -> pa.Table:
    """row, unit (row * CELL + column of the grid cell), a, b: both maps on the finer grid of the two."""
    grid_a, grid_b = _grids(a), _grids(b)
    values_a = _flat(a, "scores").to_numpy().astype(np.float64)
    values_b = _flat(b, "scores").to_numpy().astype(np.float64)
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
        pieces.append(pa.table({
            "row": np.repeat(rows, len(cells)),
            "unit": np.tile((cells // grid[1]) * CELL + cells % grid[1], len(rows)),
            "a": maps_a.reshape(-1), "b": maps_b.reshape(-1)}))
    if not pieces:
        return pa.table({"row": pa.array([], pa.int64()), "unit": pa.array([], pa.int64()),
                         "a": pa.array([], pa.float64()), "b": pa.array([], pa.float64())})
    return pa.concat_tables(pieces).sort_by([("row", "ascending"), ("unit", "ascending")])


def patch_name(code: int) -> str:
    """An image unit key as its display name, 'patch r,c'."""
    return f"patch {int(code) // CELL},{int(code) % CELL}"


def patch_code(name: str) -> int:
    """'patch r,c' as an image unit key."""
    match = PATCH.match(name)
    if match is None:
        raise ValueError(f"not a patch name: {name!r}")
    return int(match.group(1)) * CELL + int(match.group(2))


def common_units(a: pa.Table, b: pa.Table) -> tuple[pa.Table, pa.Table, pa.Table]:
    """The two tables in one row order, and their units both see (row, unit, a, b; in row order), each side's
    shares renormalised over them to sum to 1 (a row of zeros stays zeros)."""
    a, b = _joined(a, b)
    kinds = set(a.column("kind").unique().to_pylist()) | set(b.column("kind").unique().to_pylist())
    if len(kinds) > 1:
        raise InputError("one run holds text rows and the other image rows: they cannot be compared")
    units = _image_units(a, b) if kinds == {"image"} else _text_units(a, b)
    rows = units.column("row").to_numpy()
    for side in ("a", "b"):
        values = units.column(side).to_numpy()
        totals = np.bincount(rows, values, len(a))[rows]
        units = units.set_column(units.schema.get_field_index(side), side,
                                 pa.array(np.divide(values, totals, out=values.copy(), where=totals > 0)))
    return a, b, units


def _is_image(a: pa.Table) -> bool:
    return len(a) > 0 and a.column("kind")[0].as_py() == "image"


def _classes(a: pa.Table, b: pa.Table, by: str) -> pa.Array:
    if by not in GROUPINGS:
        raise InputError(f"rows are grouped by one of {', '.join(GROUPINGS)}, not {by!r}")
    source = {"prediction_a": a.column("prediction"), "prediction_b": b.column("prediction"),
              "label": a.column("label")}[by]
    return pc.fill_null(source.combine_chunks().cast(pa.string()), NO_CLASS)


def _agree(a: pa.Table, b: pa.Table) -> pa.Array:
    """The predictions are equal (two missing predictions agree)."""
    pred_a, pred_b = a.column("prediction"), b.column("prediction")
    both_missing = pc.and_(pc.is_null(pred_a), pc.is_null(pred_b))
    return pc.or_(pc.fill_null(pc.equal(pred_a, pred_b), False), both_missing).combine_chunks()


def compare_part(a: pa.Table, b: pa.Table, settings: Settings, positions: np.ndarray | None = None) -> Part:
    """Compare the rows of `a` and `b` (same ids, any order; COLUMNS); `positions`: each row of `a`'s place in its
    run (kept to give the rows back in that order), by default its place in `a`."""
    a = a.append_column("_position", pa.array(np.arange(len(a)) if positions is None else
                                              np.asarray(positions, dtype=np.int64)))
    a, b, units = common_units(a, b)
    n = len(a)
    row, va, vb = (units.column(c).to_numpy() for c in ("row", "a", "b"))
    classes = _classes(a, b, settings.by)
    rows = pa.table({
        "position": a.column("_position"), "id": a.column("id"), "class": classes, "label": a.column("label"),
        "prediction_a": a.column("prediction"), "prediction_b": b.column("prediction"),
        "probability_a": a.column("probability").cast(pa.float64()),
        "probability_b": b.column("probability").cast(pa.float64()), "agree": _agree(a, b),
        "spearman": ragged.spearman_rows(row, va, vb, n), "top_k_overlap": ragged.top_k_overlap_rows(row, va, vb,
                                                                                                     settings.k, n),
        "units": np.bincount(row, minlength=n), "units_a": _lengths(a), "units_b": _lengths(b)})
    sums = pa.table({"class": classes.take(pa.array(row)), "unit": units.column("unit"),
                     "count": np.ones(len(row), dtype=np.int64), "sum_a": to_fixed(va), "sum_b": to_fixed(vb)})
    grouped = merge_units([sums])
    if _is_image(a):
        grouped = grouped.set_column(1, "unit", pa.array([patch_name(u) for u in grouped.column("unit").to_pylist()]))
    return Part(rows, grouped, _candidates(rows, a, b, settings.examples))


def merge_units(parts: list[pa.Table]) -> pa.Table:
    """Per (class, unit) the sums of count, sum_a and sum_b over `parts` (integers: any order, the same sums)."""
    table = pa.concat_tables(parts).group_by(["class", "unit"], use_threads=False).aggregate(
        [("count", "sum"), ("sum_a", "sum"), ("sum_b", "sum")])
    return table.rename_columns([{"count_sum": "count", "sum_a_sum": "sum_a", "sum_b_sum": "sum_b"}.get(c, c)
                                 for c in table.column_names]).select(UNIT_COLUMNS)


def _candidates(rows: pa.Table, a: pa.Table, b: pa.Table, keep: int) -> dict[str, pd.DataFrame]:
    """The rows that may be among the `keep` most disagreeing of each kind, with both sides' stored units."""
    rho = rows.column("spearman").to_numpy()
    agree = rows.column("agree").to_numpy(zero_copy_only=False)
    ids = rows.column("id").to_pylist()
    kind = "image" if _is_image(a) else "text"
    out = {}
    for name, mask, sign in (("explanations_differ", agree, 1.0), ("predictions_differ", ~agree, -1.0)):
        chosen = _smallest(sign * rho, ids, np.flatnonzero(mask & ~np.isnan(rho)), keep)
        taken = pa.array(chosen, type=pa.int64())
        extra: dict[str, list[Any]] = {"text": a.column("text").take(taken).to_pylist(), "kind": [kind] * len(chosen)}
        for side, table in (("a", a), ("b", b)):
            for column in ("words", "starts", "ends", "scores"):
                extra[f"{column}_{side}"] = table.column(column).take(taken).to_pylist()
        out[name] = rows.take(taken).to_pandas().drop(columns="position").assign(**extra)
    return out


def _smallest(key: np.ndarray, ids: list[str], among: np.ndarray, keep: int) -> list[int]:
    """The `keep` positions of `among` with the smallest `key`, ties by id."""
    if len(among) > keep > 0:
        bound = np.partition(key[among], keep - 1)[keep - 1]
        among = among[key[among] <= bound]
    return sorted(among.tolist(), key=lambda i: (key[i], ids[i]))[:keep]


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
    row, va, vb = (units.column(c).to_numpy() for c in ("row", "a", "b"))
    wanted_units = [str(u) for u in selected["unit"]]
    wanted = pa.table({"class": pa.array([str(c) for c in selected["class"]], pa.string()),
                       "unit": pa.array([patch_code(u) for u in wanted_units], pa.int64()) if _is_image(a)
                       else pa.array(wanted_units, pa.string())})
    flat = pa.table({"row": row, "class": _classes(a, b, settings.by).take(pa.array(row)),
                     "unit": units.column("unit"), "diff": to_fixed(vb) - to_fixed(va)})
    flat = flat.join(wanted, keys=["class", "unit"], join_type="inner")
    per_row = flat.group_by(["class", "unit", "row"], use_threads=False).aggregate([("diff", "sum"), ("diff", "count")])
    per_row = per_row.to_pandas().sort_values(["class", "unit", "row"], ignore_index=True)
    involved = np.unique(per_row["row"].to_numpy())
    ids = a.column("id").to_pylist()
    weights = poisson_weights(row_keys([ids[r] for r in involved]), replicates, seed)
    out: dict[str, list[Any]] = {"class": [], "unit": [], "num": [], "den": []}
    for (cls, unit), group in per_row.groupby(["class", "unit"], sort=True):
        w = weights[np.searchsorted(involved, group["row"].to_numpy())]
        out["class"].append(cls)
        out["unit"].append(patch_name(unit) if isinstance(unit, (int, np.integer)) else unit)
        out["num"].append(group["diff_sum"].to_numpy(dtype=np.int64) @ w)
        out["den"].append(group["diff_count"].to_numpy(dtype=np.int64) @ w)
    return pd.DataFrame(out, columns=["class", "unit", "num", "den"])
