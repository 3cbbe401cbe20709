"""A corpus result folder that cannot lose or double a row.

Files: `manifest.json` (what the rows were made with), `journal.jsonl` (one line per finished chunk: its name,
ids, row count, size and SHA-256; a later line may drop a chunk found missing or damaged), the chunks
`chunk-NNNNNN.parquet`, `skipped.csv` (rows that could not be explained, and why) and, while a run writes,
`.lock` (the run's pid and host).

- A chunk is written whole to a temporary name of its own, recorded in the journal, then linked to its final
  name, which is never reused nor replaced (`os.link` fails on an existing name): a crash or kill at any point
  leaves whole chunks, each in the journal, and a rerun explains exactly the ids no whole chunk holds.
- A run takes the folder's lock first (an exclusive `flock` on `.lock`, which the kernel drops when the process
  dies, so the lock of a run that is gone is taken over at once); a second run into the folder is refused.
- A rerun checks every recorded chunk against its size and checksum: a missing or damaged one is dropped from
  the journal (a damaged file is kept aside as `*.damaged`), named, and its rows explained again; a chunk file
  the journal does not record is refused.
- Folders written before the journal existed are adopted once: their readable chunks are recorded as found.
"""
from __future__ import annotations

import contextlib
import dataclasses
import errno
import hashlib
import json
import os
import re
import socket
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from rollout_core.errors import InputError

MANIFEST = "manifest.json"
JOURNAL = "journal.jsonl"
LOCK = ".lock"
SKIPPED = "skipped.csv"
CHUNK_GLOB = "chunk-*.parquet"
_CHUNK_NAME = re.compile(r"^chunk-(\d{6,})\.parquet$")
_FULL = {errno.ENOSPC: "the disk is full", errno.EDQUOT: "the disk quota is used up",
         errno.EFBIG: "a file-size limit was reached"}


@dataclasses.dataclass(frozen=True)
class Chunk:
    """A finished chunk as the journal records it."""

    name: str
    ids: tuple[str, ...]
    size: int
    sha256: str


@dataclasses.dataclass(frozen=True)
class Lost:
    """A recorded chunk a rerun found missing or damaged (its rows are explained again)."""

    name: str
    why: str  # "missing" | "damaged"
    rows: int | None  # None: not known (a damaged chunk of a folder from before the journal)


class ResultFolder:
    """A result folder opened for writing by this process (see the module docstring); use `open_for_writing`."""

    def __init__(self, path: Path, chunks: list[Chunk], lost: list[Lost], adopted: int) -> None:
        self.path, self.chunks, self.lost, self.adopted = path, chunks, lost, adopted
        self._next = 1 + max((_index(name) for name in _names_ever(path)), default=-1)

    def done_ids(self) -> set[str]:
        """Ids held by the folder's whole chunks."""
        return {i for chunk in self.chunks for i in chunk.ids}

    def rows(self) -> int:
        """Rows the folder holds (each id once)."""
        return sum(len(chunk.ids) for chunk in self.chunks)

    def write_chunk(self, table: pa.Table) -> Chunk:
        """Write `table` as the next chunk: temporary file, journal line, then its final name (never replaced)."""
        sink = pa.BufferOutputStream()
        pq.write_table(table, sink)
        data = sink.getvalue().to_pybytes()
        ids = tuple(str(i) for i in table.column("id").to_pylist())
        tmp = self.path / f".chunk-{os.getpid()}-{self._next:06d}.tmp"
        with _space_errors(self):
            _write_synced(tmp, data)
            while True:
                name = f"chunk-{self._next:06d}.parquet"
                self._next += 1
                if not (self.path / name).exists():
                    break
            chunk = Chunk(name, ids, len(data), hashlib.sha256(data).hexdigest())
            _append(self.path / JOURNAL, {"chunk": name, "rows": len(ids), "bytes": chunk.size,
                                          "sha256": chunk.sha256, "ids": list(ids)})
            os.link(tmp, self.path / name)  # fails instead of replacing, should a name be taken after all
            tmp.unlink()
        self.chunks.append(chunk)
        return chunk

    def write_skipped(self, skipped: pd.DataFrame) -> None:
        """`skipped.csv` (id, reason) for this run's corpus; removed when nothing was skipped."""
        path = self.path / SKIPPED
        if skipped.empty:
            path.unlink(missing_ok=True)
            return
        with _space_errors(self):
            _write_synced(self.path / f".{SKIPPED}.tmp", skipped.to_csv(index=False).encode())
            os.replace(self.path / f".{SKIPPED}.tmp", path)


@contextlib.contextmanager
def open_for_writing(out: Path, facts: dict[str, Any]) -> Iterator[ResultFolder]:
    """The folder `out` (created if missing) locked for this run, its manifest checked against `facts` (or
    written), its chunks verified; the lock is released on exit."""
    if out.exists() and not out.is_dir():
        raise InputError(f"--out {out} is a file, not a folder; name a folder (it is created if missing)")
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise InputError(f"cannot create the result folder {out}: {err.strerror or err}") from None
    with _locked(out):
        try:
            unfinished = set()
            for stale in out.glob(".chunk-*.tmp"):  # left by a killed run (we hold the lock: not a live run's)
                unfinished.add(f"chunk-{stale.name.rsplit('-', 1)[-1].removesuffix('.tmp')}.parquet")
                stale.unlink()
            _check_manifest(out, facts)
            chunks, lost, adopted = _verify(out, unfinished)
        except OSError as err:  # a full disk or a folder we may not write, before any row
            raise InputError(f"cannot write to {out}: {_FULL.get(err.errno) or err.strerror or err}") from None
        yield ResultFolder(out, chunks, lost, adopted)


def recorded_chunks(out: Path) -> list[Chunk]:
    """The chunks `out`'s journal records as live (for a folder without a journal: its chunk files, read)."""
    journal = out / JOURNAL
    if journal.is_file():
        return list(_replay(journal).values())
    return [_adoptable(path) for path in sorted(out.glob(CHUNK_GLOB))]


def read_results(out_dir: str | Path) -> pd.DataFrame:
    """All rows of a result folder as one frame; `InputError` (one line) when it holds none, or a chunk it
    records is missing or damaged (a rerun of the corpus command explains those rows again)."""
    out = Path(out_dir)
    if not out.is_dir():
        raise InputError(f"{out} is not a result folder")
    chunks = recorded_chunks(out)
    if not chunks:
        raise InputError(f"{out} holds no result chunks")
    tables = []
    for chunk in chunks:
        path = out / chunk.name
        try:
            if path.stat().st_size != chunk.size:
                raise OSError("its size is not the recorded one")
            tables.append(pq.read_table(path))
        except (OSError, pa.ArrowException) as err:
            raise InputError(f"{path} is missing or damaged ({_reason(err)}); rerun the corpus command into {out} "
                             "to explain its rows again") from None
    return pa.concat_tables(tables).to_pandas()


# ----------------------------------------------------------------------------------------------
# The lock


@contextlib.contextmanager
def _locked(out: Path) -> Iterator[None]:
    import fcntl  # POSIX; the corpus command's folders are written on Linux and macOS

    path = out / LOCK
    while True:
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        except OSError as err:
            raise InputError(f"cannot write to {out}: {_FULL.get(err.errno) or err.strerror or err}") from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            owner = _owner(fd)
            os.close(fd)
            raise InputError(f"another corpus run ({_describe(owner)}) is writing to {out}; wait for it to end, "
                             "or stop it, then rerun") from None
        try:
            same = os.fstat(fd).st_ino == os.stat(path).st_ino
        except FileNotFoundError:  # the previous holder removed it as we opened it: open the new one
            same = False
        if same:
            break
        os.close(fd)
    previous = _owner(fd)
    host = socket.gethostname()
    if previous.get("host") not in (None, host):  # flock cannot see a process on another machine
        os.close(fd)
        raise InputError(f"a corpus run on host {previous['host']} ({_describe(previous)}) holds {out}; if it is no "
                         f"longer running, remove {path} and rerun")
    try:
        os.ftruncate(fd, 0)
        os.pwrite(fd, json.dumps({"pid": os.getpid(), "host": host,
                                  "started": time.strftime("%Y-%m-%d %H:%M:%S")}).encode(), 0)
    except OSError as err:
        path.unlink(missing_ok=True)
        os.close(fd)
        raise InputError(f"cannot write to {out}: {_FULL.get(err.errno) or err.strerror or err}") from None
    try:
        yield
    finally:
        path.unlink(missing_ok=True)
        os.close(fd)


def _owner(fd: int) -> dict[str, Any]:
    try:
        value = json.loads(os.pread(fd, 4096, 0) or b"{}")
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def _describe(owner: dict[str, Any]) -> str:
    if not owner:
        return "starting"
    return f"pid {owner.get('pid')} on {owner.get('host')}, started {owner.get('started')}"


# ----------------------------------------------------------------------------------------------
# Manifest, journal, verification


def _check_manifest(out: Path, facts: dict[str, Any]) -> None:
    """Record what the folder's rows are made with; refuse to mix rows of other settings into it."""
    path = out / MANIFEST
    if path.is_file():
        try:
            recorded = json.loads(path.read_text(encoding="utf-8"))
        except (ValueError, OSError) as err:
            raise InputError(f"{path} is damaged ({_reason(err)}); use a new --out folder") from None
        if recorded != facts:
            differ = ", ".join(f"{k} {recorded.get(k)!r} (now {v!r})" for k, v in facts.items()
                               if not isinstance(recorded, dict) or recorded.get(k) != v)
            raise InputError(f"{out} holds results made with other settings: {differ}; use a new --out folder")
        return
    if any(out.glob(CHUNK_GLOB)) or (out / JOURNAL).exists():
        raise InputError(f"{out} holds result chunks without a {MANIFEST}; use a new --out folder")
    _write_synced(out / f".{MANIFEST}.tmp", json.dumps(facts).encode())
    os.replace(out / f".{MANIFEST}.tmp", path)


def _verify(out: Path, unfinished: set[str]) -> tuple[list[Chunk], list[Lost], int]:
    """The recorded chunks that are whole, the ones lost (dropped in the journal, damaged files set aside), and how
    many chunks of a folder without a journal were adopted; `InputError` for a chunk file nobody recorded.
    `unfinished`: chunks a killed run had recorded but not yet named (their temporary file was left): dropped
    without being reported as lost."""
    journal = out / JOURNAL
    adopted, lost = 0, []
    if not journal.exists():
        legacy = []
        for path in sorted(out.glob(CHUNK_GLOB)):
            try:
                legacy.append(_adoptable(path))
            except InputError:
                _set_aside(path)
                lost.append(Lost(path.name, "damaged", None))
        _repeated_ids(legacy, out)
        for chunk in legacy:
            _append(journal, {"chunk": chunk.name, "rows": len(chunk.ids), "bytes": chunk.size,
                              "sha256": chunk.sha256, "ids": list(chunk.ids), "adopted": True})
        adopted = len(legacy)
    _trim_partial_line(journal)
    live = _replay(journal)
    foreign = sorted(p.name for p in out.glob(CHUNK_GLOB) if p.name not in live)
    if foreign:
        raise InputError(f"{out / foreign[0]} is not a chunk this folder's {JOURNAL} records (copied in from "
                         "elsewhere?); move it out of the folder, or use a new --out folder")
    whole = []
    for chunk in live.values():
        why = _damage(out / chunk.name, chunk)
        if why is None:
            whole.append(chunk)
            continue
        if why == "damaged":
            _set_aside(out / chunk.name)
        elif chunk.name in unfinished:
            why = "unfinished"
        _append(journal, {"dropped": chunk.name, "reason": why})
        if why != "unfinished":
            lost.append(Lost(chunk.name, why, len(chunk.ids)))
    return whole, lost, adopted


def _replay(journal: Path) -> dict[str, Chunk]:
    """The live chunks of a journal, in the order written (the last line may be cut short by a crash)."""
    live: dict[str, Chunk] = {}
    try:
        lines = journal.read_bytes().split(b"\n")
    except FileNotFoundError:
        return live
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            entry = json.loads(line)
            if "dropped" in entry:
                live.pop(entry["dropped"], None)
            else:
                live[entry["chunk"]] = Chunk(entry["chunk"], tuple(entry["ids"]), int(entry["bytes"]),
                                             entry["sha256"])
        except (ValueError, KeyError, TypeError) as err:
            if number == len(lines):  # an append cut short: its chunk never got its final name
                break
            raise InputError(f"{journal} is damaged at line {number} ({_reason(err)}); use a new --out "
                             "folder") from None
    return live


def _damage(path: Path, chunk: Chunk) -> str | None:
    """None when `path` holds exactly the recorded chunk; else "missing" or "damaged"."""
    try:
        if path.stat().st_size != chunk.size:
            return "damaged"
        digest = hashlib.sha256()
        with open(path, "rb") as data:
            for block in iter(lambda: data.read(1 << 20), b""):
                digest.update(block)
    except FileNotFoundError:
        return "missing"
    except OSError:
        return "damaged"
    return None if digest.hexdigest() == chunk.sha256 else "damaged"


def _adoptable(path: Path) -> Chunk:
    """A chunk file of a folder written before the journal, as a Chunk; `InputError` when it is not readable."""
    try:
        data = path.read_bytes()
        ids = pq.read_table(pa.BufferReader(data), columns=["id"]).column("id").to_pylist()
    except (OSError, pa.ArrowException, KeyError) as err:
        raise InputError(f"{path} is damaged or not a result chunk ({_reason(err)}); move it out of the folder "
                         "and rerun to explain its rows again") from None
    return Chunk(path.name, tuple(str(i) for i in ids), len(data), hashlib.sha256(data).hexdigest())


def _repeated_ids(chunks: list[Chunk], out: Path) -> None:
    seen: dict[str, str] = {}
    for chunk in chunks:
        for i in chunk.ids:
            if i in seen:
                raise InputError(f"{out} holds id {i!r} in both {seen[i]} and {chunk.name} (two runs wrote into it "
                                 "at once); use a new --out folder")
            seen[i] = chunk.name


def _names_ever(out: Path) -> Iterator[str]:
    """Every chunk name the folder has used: recorded (live or dropped), present, or set aside."""
    journal = out / JOURNAL
    if journal.exists():
        for line in journal.read_bytes().split(b"\n"):
            with contextlib.suppress(ValueError, AttributeError):
                entry = json.loads(line)
                yield entry.get("chunk") or entry.get("dropped") or ""
    for path in out.glob("chunk-*"):
        yield path.name.split(".parquet")[0] + ".parquet"


def _index(name: str) -> int:
    match = _CHUNK_NAME.match(name)
    return int(match.group(1)) if match else -1


def _set_aside(path: Path) -> None:
    target, n = path.with_name(path.name + ".damaged"), 1
    while target.exists():
        target, n = path.with_name(f"{path.name}.damaged-{n}"), n + 1
    os.replace(path, target)


def _trim_partial_line(journal: Path) -> None:
    """Cut a last line left half-written by a crash, so the next append starts on a line of its own."""
    if not journal.exists():
        return
    data = journal.read_bytes()
    if data and not data.endswith(b"\n"):
        with open(journal, "r+b") as out:
            out.truncate(data.rfind(b"\n") + 1)


def _append(journal: Path, entry: dict[str, Any]) -> None:
    with open(journal, "ab") as out:
        out.write(json.dumps(entry).encode() + b"\n")
        out.flush()
        os.fsync(out.fileno())


def _write_synced(path: Path, data: bytes) -> None:
    try:
        with open(path, "wb") as out:
            out.write(data)
            out.flush()
            os.fsync(out.fileno())
    except BaseException:
        path.unlink(missing_ok=True)
        raise


@contextlib.contextmanager
def _space_errors(folder: ResultFolder) -> Iterator[None]:
    """A full disk (or quota, or file-size limit) as one user-facing line; the folder keeps its whole chunks."""
    try:
        yield
    except OSError as err:
        for tmp in folder.path.glob(f".chunk-{os.getpid()}-*.tmp"):
            tmp.unlink(missing_ok=True)
        what = _FULL.get(err.errno) or err.strerror or str(err)
        raise InputError(f"cannot write to {folder.path}: {what}; it keeps its {len(folder.chunks)} whole chunks "
                         f"({folder.rows()} rows): make room and rerun the same command to go on") from None


def _reason(err: BaseException) -> str:
    return " ".join(str(err).split())[:160] or type(err).__name__
