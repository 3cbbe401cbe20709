"""Which corpus cells can be explained: a missing, empty or non-text cell is skipped (counted, its id kept for
the summary and `skipped.csv`) instead of stopping the run; a text over `MAX_TEXT_CHARS` is cut there before it is
tokenised (a tokenizer reads the whole string before truncating to the model's length: an 8 MB cell took 15 s
and 1.7 GB for the first 512 tokens)."""
from __future__ import annotations

import dataclasses
import math

import pandas as pd

MAX_TEXT_CHARS = 100_000
"""Characters of a text cell kept for tokenising: far more than any model here reads (512 tokens of English are
about 2,500 characters), so the explained tokens are the same as with the whole cell."""


@dataclasses.dataclass(frozen=True)
class Cells:
    """A corpus split into the rows to explain (texts cut to MAX_TEXT_CHARS) and the rows skipped."""

    rows: pd.DataFrame
    skipped: pd.DataFrame  # columns id, reason
    cut: tuple[str, ...]  # ids of the texts cut to MAX_TEXT_CHARS


def usable(corpus: pd.DataFrame) -> Cells:
    """Split `corpus` (id, text or image, label) into what can be explained and what is skipped, with why."""
    column = "image" if "image" in corpus.columns else "text"
    reasons = [_problem(value, column) for value in corpus[column]]
    keep = [reason is None for reason in reasons]
    rows = corpus[keep]
    cut: tuple[str, ...] = ()
    if column == "text" and len(rows):
        long = rows["text"].str.len() > MAX_TEXT_CHARS
        if long.any():
            cut = tuple(str(i) for i in rows.loc[long, "id"])
            rows = rows.assign(text=[t[:MAX_TEXT_CHARS] if too else t for t, too in zip(rows["text"], long)])
    skipped = pd.DataFrame({"id": [str(i) for i, k in zip(corpus["id"], keep) if not k],
                            "reason": [r for r in reasons if r is not None]})
    return Cells(rows, skipped, cut)


def describe(cells: Cells, limit: int = 8) -> list[str]:
    """One line each for the skipped and the cut rows (none when there are none), naming up to `limit` ids."""
    lines = []
    if len(cells.skipped):
        counts = cells.skipped["reason"].value_counts()
        why = ", ".join(f"{reason}: {count}" for reason, count in counts.items())
        lines.append(f"{count(len(cells.skipped), 'row')} skipped ({why}; ids {_ids(cells.skipped['id'], limit)})")
    if cells.cut:
        lines.append(f"{count(len(cells.cut), 'text')} longer than {MAX_TEXT_CHARS:,} characters cut there before "
                     f"tokenising (ids {_ids(cells.cut, limit)}); the model reads only the start of a text")
    return lines


def _problem(value: object, column: str) -> str | None:
    if value is None or value is pd.NA or value is pd.NaT or (isinstance(value, float) and math.isnan(value)):
        return "missing"
    if column == "text":
        if not isinstance(value, str):
            return f"not text ({type(value).__name__})"
        return "empty" if not value.strip() else None
    if not isinstance(value, (str, bytes)):
        return f"not an image ({type(value).__name__})"
    return "empty" if not value or (isinstance(value, str) and not value.strip()) else None


def count(n: int, noun: str) -> str:
    """"1 row", "2,000 rows"."""
    return f"{n:,} {noun}" + ("" if n == 1 else "s")


def _ids(ids: object, limit: int) -> str:
    shown = [str(i) for i in list(ids)[:limit]]
    more = len(list(ids)) - len(shown)
    return ", ".join(shown) + (f" and {more:,} more" if more > 0 else "")
