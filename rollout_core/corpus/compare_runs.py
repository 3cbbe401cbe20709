"""Explanation diffs over a data set: two corpus runs over the same rows, compared row by row and per class.

`compare_runs(a, b)` streams both runs' Parquet files in pieces (memory does not grow with the rows but for the
per-example table, one small row each):
1. census: each run's ids and a digest of each row's data (id, text, label), read by column; two runs that do
   not hold the same rows are refused (`RunsDiffer`, naming what differs).
2. items: when both runs store the ids in the same order (two runs of one data file), slices of that order;
   else both runs are first hash-partitioned by id into buckets in a scratch folder, and each bucket is an item.
3. each item is compared (`compare_rows.compare_part`) on `map_items`' workers (threads, or Ray: the same
   numbers, as every sum is in fixed point); the parts are merged as they arrive.
4. per class, the units whose mean share moved most get a Poisson bootstrap interval (a second pass over the
   items: each row's weights are drawn from its id, so any split and order of the rows gives the same interval).
"""
from __future__ import annotations

import functools
import hashlib
import math
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from rollout_core.corpus import compare_rows
from rollout_core.corpus.bootstrap import FIXED, interval, row_keys
from rollout_core.corpus.compare_rows import COLUMNS, GROUPINGS, KINDS, Part, Settings
from rollout_core.corpus.comparison import CorpusComparison
from rollout_core.corpus.stored_runs import StoredRun, open_run, read_file
from rollout_core.errors import InputError, RunsDiffer
from rollout_core.serving.workers import map_items

ITEM_ROWS = 4096
"""Rows per item: what one worker holds of each run at a time."""
EXAMPLE_IDS = 3
"""Ids named in a refusal."""

Progress = Callable[[str, int, int], None]
"""Called with (stage, items done, items in the stage) after every item."""


# ---- census: what rows each run holds ------------------------------------------------------------------------

@dataclass(frozen=True)
class _Census:
    keys: np.ndarray  # uint64 per row, in stored order: the id's key
    digests: np.ndarray  # uint64 per row: the row's data (id, text, label)
    kinds: frozenset[str]


def _digest(row_id: str, text: str | None, label: str | None) -> int:
    data = "\x00".join((row_id, text or "", "\x01" if label is None else label)).encode("utf-8", "surrogatepass")
    return int.from_bytes(hashlib.blake2b(data, digest_size=8).digest(), "little")


def _census_file(path: Path) -> tuple[np.ndarray, np.ndarray, frozenset[str]]:
    table = read_file(path, ["id", "text", "label", "kind"])
    ids = table.column("id").to_pylist()
    digests = np.array([_digest(i, t, lab) for i, t, lab in zip(ids, table.column("text").to_pylist(),
                                                                table.column("label").to_pylist())], dtype=np.uint64)
    return row_keys(ids), digests, frozenset(table.column("kind").unique().to_pylist())


def _census(run: StoredRun) -> _Census:
    parts = [_census_file(f) for f in run.files]
    return _Census(np.concatenate([p[0] for p in parts]), np.concatenate([p[1] for p in parts]),
                   frozenset().union(*(p[2] for p in parts)))


def _ids_of(run: StoredRun, keys: np.ndarray, limit: int = EXAMPLE_IDS) -> list[str]:
    """Up to `limit` ids of `run` whose keys are in `keys`, in stored order."""
    found: list[str] = []
    for file in run.files:
        ids = read_file(file, ["id"]).column("id").to_pylist()
        hit = np.isin(row_keys(ids), keys)
        found += [i for i, h in zip(ids, hit) if h][:limit - len(found)]
        if len(found) >= limit:
            break
    return found


def _named(ids: list[str], more: int) -> str:
    shown = ", ".join(repr(i) for i in ids)
    return f"{shown}{', ...' if more > len(ids) else ''}"


def check_same_rows(a: StoredRun, b: StoredRun) -> tuple[_Census, _Census]:
    """Both runs' census; `RunsDiffer` saying why when they do not hold the same rows (ids, texts, labels)."""
    census = _census(a), _census(b)
    for run, side, c in zip((a, b), "AB", census):
        unique, counts = np.unique(c.keys, return_counts=True)
        if len(unique) < len(c.keys):
            twice = unique[counts > 1]
            raise RunsDiffer(f"run {side} ({run.folder}) holds {len(twice)} ids more than once "
                             f"({_named(_ids_of(run, twice), len(twice))}): re-run it into a new folder")
    ca, cb = census
    if ca.kinds != cb.kinds:
        raise RunsDiffer(f"run A holds {'/'.join(sorted(ca.kinds))} rows and run B {'/'.join(sorted(cb.kinds))} "
                         "rows: compare runs over the same data")
    only_a, only_b = np.setdiff1d(ca.keys, cb.keys), np.setdiff1d(cb.keys, ca.keys)
    if len(only_a) or len(only_b):
        parts = [f"run A has {len(ca.keys)} rows and run B {len(cb.keys)}"]
        if len(only_a):
            parts.append(f"{len(only_a)} of A's ids are not in B ({_named(_ids_of(a, only_a), len(only_a))})")
        if len(only_b):
            parts.append(f"{len(only_b)} of B's ids are not in A ({_named(_ids_of(b, only_b), len(only_b))})")
        raise RunsDiffer("the runs cover different rows: " + "; ".join(parts) + ". Compare runs over the same data")
    order_a, order_b = np.argsort(ca.keys), np.argsort(cb.keys)
    changed = ca.keys[order_a][ca.digests[order_a] != cb.digests[order_b]]
    if len(changed):
        raise RunsDiffer(f"the runs hold the same ids but {len(changed)} rows differ in their text or label "
                         f"({_named(_ids_of(a, changed), len(changed))}): they were made from different data")
    return ca, cb


# ---- items ---------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class _Slice:
    """Rows [start, stop) of both runs' stored order (the same ids in the same order)."""

    files_a: tuple[tuple[str, int, int], ...]  # (file, first row, end row) within the file
    files_b: tuple[tuple[str, int, int], ...]
    start: int


@dataclass(frozen=True)
class _Bucket:
    """One hash bucket of both runs, as written by `_split`: (file, row group) pieces (A's carry each row's stored
    position)."""

    files_a: tuple[tuple[str, int], ...]
    files_b: tuple[tuple[str, int], ...]


def _ranges(run: StoredRun, start: int, stop: int) -> tuple[tuple[str, int, int], ...]:
    out, first = [], 0
    for file, rows in zip(run.files, run.rows_per_file):
        lo, hi = max(start, first), min(stop, first + rows)
        if lo < hi:
            out.append((str(file), lo - first, hi - first))
        first += rows
    return tuple(out)


def _read_ranges(ranges: Sequence[tuple[str, int, int]], columns: Sequence[str]) -> pa.Table:
    return pa.concat_tables([read_file(Path(f), columns).slice(lo, hi - lo) for f, lo, hi in ranges])


def _load(item: _Slice | _Bucket, columns: Sequence[str] = COLUMNS) -> tuple[pa.Table, pa.Table, np.ndarray]:
    """The item's rows of A and of B (`columns`), and each A row's position in A's stored order."""
    if isinstance(item, _Slice):
        a = _read_ranges(item.files_a, columns)
        return a, _read_ranges(item.files_b, columns), np.arange(item.start, item.start + len(a))
    a = pa.concat_tables([pq.ParquetFile(f).read_row_group(g, columns=[*columns, "_position"])
                          for f, g in item.files_a])
    b = pa.concat_tables([pq.ParquetFile(f).read_row_group(g, columns=list(columns)) for f, g in item.files_b])
    return a.drop_columns("_position"), b, a.column("_position").to_numpy()


def _aligned(a: StoredRun, b: StoredRun, ca: _Census, cb: _Census) -> bool:
    """Both runs store the same ids in the same order, in files small enough to slice without holding much."""
    small = max(a.rows_per_file + b.rows_per_file) <= 2 * ITEM_ROWS
    return small and np.array_equal(ca.keys, cb.keys)


@dataclass(frozen=True)
class _Split:
    """Write part of one run's files into hash buckets: one Parquet file per bucket."""

    files: tuple[str, ...]
    first_position: int  # the stored position of the first row of files[0]
    side: str
    group: int
    buckets: int
    scratch: str


def _split(job: _Split) -> list[list[tuple[str, int]]]:
    """Rows of `job.files` by bucket (key % buckets) into scratch/<side>/g<group>.parquet, one row group per bucket
    (one file per group, not per group and bucket: the pieces grow as (rows / ITEM_ROWS)^2); A's rows with their
    stored positions. Returns each bucket's (file, row group) (empty list where no row fell)."""
    tables = []
    position = job.first_position
    for file in job.files:
        table = read_file(Path(file), COLUMNS)
        if job.side == "a":
            table = table.append_column("_position", pa.array(np.arange(position, position + len(table))))
        position += len(table)
        tables.append(table)
    table = pa.concat_tables(tables)
    bucket = row_keys(table.column("id").to_pylist()) % np.uint64(job.buckets)
    order = np.argsort(bucket, kind="stable")
    ends = np.searchsorted(bucket[order], np.arange(job.buckets + 1))
    table = table.take(pa.array(order))
    path = str(Path(job.scratch) / job.side / f"g{job.group:06d}.parquet")
    out: list[list[tuple[str, int]]] = []
    groups = 0
    with pq.ParquetWriter(path, table.schema) as writer:
        for index in range(job.buckets):
            lo, hi = int(ends[index]), int(ends[index + 1])
            if lo == hi:
                out.append([])
                continue
            writer.write_table(table.slice(lo, hi - lo), row_group_size=hi - lo)  # one row group per bucket
            out.append([(path, groups)])
            groups += 1
    return out


def _splits(run: StoredRun, side: str, buckets: int, scratch: Path) -> list[_Split]:
    jobs, files, rows, first, position = [], [], 0, 0, 0
    for file, count in zip(run.files, run.rows_per_file):
        files.append(str(file))
        rows += count
        if rows >= ITEM_ROWS:
            jobs.append(_Split(tuple(files), first, side, len(jobs), buckets, str(scratch)))
            files, rows, first = [], 0, position + count
        position += count
    if files:
        jobs.append(_Split(tuple(files), first, side, len(jobs), buckets, str(scratch)))
    return jobs


# ---- the workers' functions (module level: picklable for Ray actors) --------------------------------------------

def _split_worker() -> Callable[[_Split], list[list[str]]]:
    return _split


def _compare_worker(settings: Settings) -> Callable[[Any], Part]:
    return functools.partial(_part, settings=settings)


def _part(item: _Slice | _Bucket, settings: Settings) -> Part:
    a, b, positions = _load(item)
    return compare_rows.compare_part(a, b, settings, positions)


def _replicate_worker(settings: Settings, selected: pd.DataFrame, replicates: int, seed: int
                      ) -> Callable[[Any], pd.DataFrame]:
    def run(item: _Slice | _Bucket) -> pd.DataFrame:
        a, b, _ = _load(item, compare_rows.REPLICATE_COLUMNS)
        return compare_rows.replicate_part(a, b, settings, selected, replicates, seed)
    return run


# ---- merging and the finished comparison ---------------------------------------------------------------------

def _stage(name: str, make: Callable[[], Callable[[Any], Any]], items: list[Any], engine: str, workers: int,
           address: str | None, progress: Progress | None) -> Iterator[Any]:
    with map_items(make, items, engine=engine, workers=workers, address=address) as results:
        for done, result in enumerate(results, 1):
            if progress is not None:
                progress(name, done, len(items))
            yield result


def compare_runs(a: str | Path, b: str | Path, *, by: str = "prediction_a", k: int = 5, top: int = 15,
                 min_count: int = 5, replicates: int = 1000, seed: int = 0, level: float = 0.95,
                 examples: int = 10, engine: str = "local", workers: int = 1, address: str | None = None,
                 scratch: str | Path | None = None, progress: Progress | None = None) -> CorpusComparison:
    """Compare two finished corpus runs over the same rows (see the module docstring).

    `by`: the class a row counts under (prediction_a, prediction_b or label); `k`: top-k overlap; `top`: units
    kept per class in the moved and top lists; `min_count`: fewest occurrences of a unit in a class for it to be
    ranked; `replicates`, `seed`, `level`: the bootstrap; `examples`: rows kept per kind of disagreement;
    `engine`/`workers`/`address`: where the items are compared (threads here, or Ray actors; the figures are the
    same); `scratch`: where runs stored in different orders are partitioned (default: a temporary folder; on a
    Ray cluster a folder every worker can read and write).
    Raises `RunsDiffer` when the runs do not hold the same rows, InputError for bad arguments."""
    settings = Settings(by=by, k=k, examples=examples)
    if by not in GROUPINGS:
        raise InputError(f"by must be one of {', '.join(GROUPINGS)}, not {by!r}")
    for name, value, low in (("k", k, 1), ("top", top, 1), ("min_count", min_count, 1), ("replicates", replicates, 2),
                             ("examples", examples, 0), ("workers", workers, 1)):
        if isinstance(value, bool) or not isinstance(value, int) or value < low:
            raise InputError(f"{name} must be a whole number >= {low}, not {value!r}")
    if not 0 < level < 1:
        raise InputError(f"level must be between 0 and 1, not {level!r}")
    if scratch is not None and not Path(scratch).is_dir():
        raise InputError(f"the scratch folder {scratch} does not exist")
    run_a, run_b = open_run(a, "run A"), open_run(b, "run B")
    census_a, census_b = check_same_rows(run_a, run_b)
    owned = None
    try:
        if _aligned(run_a, run_b, census_a, census_b):
            items: list[Any] = [_Slice(_ranges(run_a, s, s + ITEM_ROWS), _ranges(run_b, s, s + ITEM_ROWS), s)
                                for s in range(0, run_a.rows, ITEM_ROWS)]
        else:
            owned = Path(tempfile.mkdtemp(prefix="rollout-compare-", dir=scratch))
            items = _partitioned(run_a, run_b, owned, engine, workers, address, progress)
        rows, units, candidates = [], None, {}
        for part in _stage("compare", functools.partial(_compare_worker, settings), items, engine, workers,
                           address, progress):
            rows.append(part.rows)
            units = part.units if units is None else compare_rows.merge_units([units, part.units])
            for kind, frame in part.candidates.items():
                ascending = kind == "explanations_differ"
                candidates[kind] = compare_rows.pick(pd.concat([candidates.get(kind), frame]), examples, ascending)
        table = _unit_table(units)
        moved = _moved(table, top, min_count)
        sums = None
        if len(moved):
            make = functools.partial(_replicate_worker, settings, moved[["class", "unit"]], replicates, seed)
            for part in _stage("bootstrap", make, items, engine, workers, address, progress):
                sums = part if sums is None else _merge_replicates(sums, part)
        moved = _with_intervals(moved, sums, level)
    finally:
        if owned is not None:
            shutil.rmtree(owned, ignore_errors=True)
    kind = next(iter(census_a.kinds), "text")
    frame = pa.concat_tables(rows).sort_by("position").drop_columns("position").to_pandas()
    return CorpusComparison(
        a=str(run_a.folder), b=str(run_b.folder), describe_a=run_a.describe(), describe_b=run_b.describe(),
        kind=kind, by=by, summary=_summary(frame, k), examples=frame, classes=_class_table(frame),
        units=table[table["count"] >= min_count].reset_index(drop=True), moved=moved,
        top_lists=_top_lists(table, top, min_count),
        disagreements={kind_: candidates.get(kind_, pd.DataFrame()) for kind_ in KINDS},
        maps=_maps(table) if kind == "image" else {},
        settings={"by": by, "k": k, "top": top, "min_count": min_count, "replicates": replicates, "seed": seed,
                  "level": level, "examples": examples, "engine": engine},
        manifest_a=run_a.manifest, manifest_b=run_b.manifest)


def _partitioned(a: StoredRun, b: StoredRun, scratch: Path, engine: str, workers: int, address: str | None,
                 progress: Progress | None) -> list[_Bucket]:
    """Both runs hash-partitioned by id into buckets of about ITEM_ROWS rows under `scratch`."""
    buckets = max(1, math.ceil(a.rows / ITEM_ROWS))
    files: dict[str, list[list[tuple[str, int]]]] = {side: [[] for _ in range(buckets)] for side in "ab"}
    jobs = []
    for run, side in ((a, "a"), (b, "b")):
        (scratch / side).mkdir()
        jobs += _splits(run, side, buckets, scratch)
    for job, written in zip(jobs, _stage("partition", _split_worker, jobs, engine, workers, address, progress)):
        for index, paths in enumerate(written):
            files[job.side][index] += paths
    return [_Bucket(tuple(fa), tuple(fb)) for fa, fb in zip(files["a"], files["b"]) if fa]


def _unit_table(merged: pa.Table | None) -> pd.DataFrame:
    """class, unit, count, mean_a, mean_b, diff (B - A) from the merged fixed-point sums."""
    if merged is None or merged.num_rows == 0:
        return pd.DataFrame(columns=["class", "unit", "count", "mean_a", "mean_b", "diff"])
    units = merged.to_pandas()
    count = units["count"].to_numpy(dtype=np.float64)
    mean_a, mean_b = units["sum_a"] / FIXED / count, units["sum_b"] / FIXED / count
    table = pd.DataFrame({"class": units["class"], "unit": units["unit"], "count": units["count"].astype(np.int64),
                          "mean_a": mean_a, "mean_b": mean_b,
                          "diff": (units["sum_b"] - units["sum_a"]) / FIXED / count})
    return table.sort_values(["class", "unit"], ignore_index=True)


def _ranked(table: pd.DataFrame, column: str, top: int, ascending: bool = False) -> pd.DataFrame:
    """Per class, the `top` rows by `column` (ties: unit name), in that order."""
    key = table[column] if ascending else -table[column]
    ordered = table.assign(_key=key).sort_values(["class", "_key", "unit"], kind="stable")
    return ordered.groupby("class", sort=True).head(top).drop(columns="_key").reset_index(drop=True)


def _moved(table: pd.DataFrame, top: int, min_count: int) -> pd.DataFrame:
    counted = table[table["count"] >= min_count]
    return _ranked(counted.assign(moved=counted["diff"].abs()), "moved", top).drop(columns="moved")


def _merge_replicates(total: pd.DataFrame, part: pd.DataFrame) -> pd.DataFrame:
    both = pd.concat([total, part], ignore_index=True)
    return both.groupby(["class", "unit"], sort=False, as_index=False).agg(num=("num", "sum"), den=("den", "sum"))


def _with_intervals(moved: pd.DataFrame, sums: pd.DataFrame | None, level: float) -> pd.DataFrame:
    lows, highs = [], []
    found = {} if sums is None else {(c, u): (n, d) for c, u, n, d in sums.itertuples(index=False)}
    for cls, unit in zip(moved["class"], moved["unit"]):
        num, den = found.get((cls, unit), (np.zeros(2, np.int64), np.zeros(2, np.int64)))
        low, high = interval(np.asarray(num) / FIXED, den, level)
        lows.append(low)
        highs.append(high)
    return moved.assign(low=lows, high=highs)


def _top_lists(table: pd.DataFrame, top: int, min_count: int) -> pd.DataFrame:
    """Per class, the units in A's or B's top `top` by mean share, their ranks (NaN: not in that list) and change."""
    counted = table[table["count"] >= min_count]
    out = []
    for side in ("a", "b"):
        ranked = _ranked(counted, f"mean_{side}", top)
        ranked[f"rank_{side}"] = ranked.groupby("class").cumcount() + 1
        out.append(ranked[["class", "unit", f"rank_{side}"]])
    lists = out[0].merge(out[1], on=["class", "unit"], how="outer")
    lists = lists.merge(counted, on=["class", "unit"], how="left")
    lists["change"] = np.where(lists["rank_a"].isna(), "entered", np.where(lists["rank_b"].isna(), "left", "stayed"))
    return lists.sort_values(["class", "rank_b", "rank_a"], ignore_index=True)


def _summary(frame: pd.DataFrame, k: int) -> dict[str, Any]:
    rho = frame["spearman"].dropna()
    quartiles = np.quantile(rho, [0.25, 0.5, 0.75]) if len(rho) else [float("nan")] * 3
    out: dict[str, Any] = {
        "rows": int(len(frame)), "agreement": float(frame["agree"].mean()) if len(frame) else float("nan"),
        "agreeing_rows": int(frame["agree"].sum()), "spearman_rows": int(len(rho)),
        "spearman_q1": float(quartiles[0]), "spearman_median": float(quartiles[1]),
        "spearman_q3": float(quartiles[2]), "spearman_mean": float(rho.mean()) if len(rho) else float("nan"),
        "k": k, "top_k_overlap": float(frame["top_k_overlap"].mean()),
        "units_per_row": float(frame["units"].mean()) if len(frame) else float("nan"),
        "rows_with_fewer_units": int(((frame["units"] < frame["units_a"]) | (frame["units"] < frame["units_b"])).sum()),
    }
    labelled = frame["label"].notna()
    if len(frame) and labelled.all():
        out["accuracy_a"] = float((frame["prediction_a"] == frame["label"]).mean())
        out["accuracy_b"] = float((frame["prediction_b"] == frame["label"]).mean())
    return out


def _class_table(frame: pd.DataFrame) -> pd.DataFrame:
    grouped = frame.groupby("class", sort=True)
    return pd.DataFrame({
        "rows": grouped.size(), "agreement": grouped["agree"].mean(),
        "spearman_median": grouped["spearman"].median(), "top_k_overlap": grouped["top_k_overlap"].mean(),
    }).reset_index()


def _maps(table: pd.DataFrame) -> dict[str, np.ndarray]:
    """Per class, the mean difference map B - A on the grid its patch names span."""
    out = {}
    for cls, group in table.groupby("class", sort=True):
        codes = np.array([compare_rows.patch_code(u) for u in group["unit"]])
        rows, cols = codes // compare_rows.CELL, codes % compare_rows.CELL
        grid = np.full((rows.max() + 1, cols.max() + 1), np.nan)
        grid[rows, cols] = group["diff"].to_numpy()
        out[str(cls)] = grid
    return out
