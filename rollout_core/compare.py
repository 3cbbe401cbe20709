"""Comparing two explanations of the same input: alignment, rank correlation, top-k overlap.

Two models rarely share a tokenizer. When the shown tokens differ, both explanations are mapped onto
the words of the text by character offsets (a word's score is the SUM of its tokens' scores: scores
are shares of the prediction, and shares add up, so a word split into three pieces keeps its whole
share). Image maps on different patch grids are resampled onto the finer grid.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np
import torch
from scipy.stats import spearmanr

from rollout_core.errors import InputError
from rollout_core.explanation import Explanation

WORD = re.compile(r"\w+(?:['’]\w+)*|[^\w\s]", re.UNICODE)


@dataclass
class Comparison:
    """Two score vectors over the same units (tokens, words or patches) and how much they agree."""

    units: list[str]
    a: np.ndarray
    b: np.ndarray
    spearman: float  # NaN when a side is constant (see `note`)
    k: int
    top_k_overlap: float  # share of the k highest units of `a` that are also among the k highest of `b`
    aligned_by_words: bool
    note: str  # what was done to make the two comparable, or why a figure is undefined


def words(text: str) -> list[tuple[str, int, int]]:
    """Words (and single punctuation marks) of `text` with their character spans."""
    return [(m.group(), m.start(), m.end()) for m in WORD.finditer(text)]


def token_spans(expl: Explanation) -> list[tuple[int, int, int]]:
    """(position, start, end) in `expl.text` of every shown token, in position order.

    A span is clipped so that it never reaches back over an earlier token's characters (byte-level
    tokenizers can give two tokens the same character); a span emptied that way has start == end.
    Without offsets every span is (0, 0).
    """
    spans = []
    cursor = 0
    for position in expl.display_positions():
        start, end = (0, 0) if expl.offsets is None else (int(v) for v in expl.offsets[position])
        start = max(start, min(cursor, end))
        spans.append((int(position), start, end))
        cursor = max(cursor, end)
    return spans


def word_scores(expl: Explanation, scores: np.ndarray | None = None) -> list[tuple[str, int, int, float]]:
    """Shown token scores summed onto the words of the text they overlap, renormalised to sum to 1.

    A token overlapping several words (rare: byte-level merges) is split between them evenly.
    """
    if expl.text is None or expl.offsets is None:
        raise InputError("word scores need a text explanation with character offsets")
    spans = words(expl.text)
    totals = np.zeros(len(spans))
    shown = expl.display_scores(scores)
    starts = np.array([s for _, s, _ in spans])
    ends = np.array([e for _, _, e in spans])
    for position, value in zip(expl.display_positions(), shown):
        start, end = expl.offsets[position]
        if end <= start:
            continue
        hit = np.flatnonzero((starts < end) & (ends > start))
        if hit.size:
            totals[hit] += value / hit.size
    total = totals.sum()
    if total > 0:
        totals = totals / total
    return [(w, s, e, float(v)) for (w, s, e), v in zip(spans, totals)]


def spearman(a: np.ndarray, b: np.ndarray) -> tuple[float, str]:
    """Spearman rank correlation and a note; NaN (not an error) when either side is constant."""
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if a.shape != b.shape:
        raise InputError(f"cannot correlate {a.shape} with {b.shape} scores")
    if a.size < 2:
        return float("nan"), "fewer than two units: no rank correlation"
    if np.ptp(a) == 0 or np.ptp(b) == 0:
        return float("nan"), "one side gives every unit the same score: rank correlation is undefined"
    return float(spearmanr(a, b).statistic), ""


def top_k_overlap(a: np.ndarray, b: np.ndarray, k: int) -> float:
    """|top-k(a) ∩ top-k(b)| / k, ties broken by position."""
    k = min(k, len(a))
    if k <= 0:
        return float("nan")
    top_a = set(np.argsort(-np.asarray(a), kind="stable")[:k].tolist())
    top_b = set(np.argsort(-np.asarray(b), kind="stable")[:k].tolist())
    return len(top_a & top_b) / k


def _text_units(a: Explanation, b: Explanation, scores_a, scores_b) -> tuple[list[str], np.ndarray, np.ndarray, bool, str]:
    if a.text != b.text:
        raise InputError("the two explanations are of different texts")
    same_tokens = a.display_tokens() == b.display_tokens() and (
        a.offsets is None or b.offsets is None
        or [a.offsets[i] for i in a.display_positions()] == [b.offsets[i] for i in b.display_positions()]
    )
    if same_tokens:
        return a.display_tokens(), a.display_scores(scores_a), b.display_scores(scores_b), False, ""
    wa, wb = word_scores(a, scores_a), word_scores(b, scores_b)
    return ([w for w, *_ in wa], np.array([v for *_, v in wa]), np.array([v for *_, v in wb]), True,
            "the tokenizers differ: scores were summed onto words by character offsets")


def _resample(score_map: np.ndarray, grid: tuple[int, int]) -> np.ndarray:
    tensor = torch.from_numpy(np.ascontiguousarray(score_map, dtype=np.float64))[None, None]
    out = torch.nn.functional.interpolate(tensor, size=grid, mode="bilinear", align_corners=False)[0, 0].numpy()
    return out / out.sum() if out.sum() > 0 else out


def _image_units(a: Explanation, b: Explanation, scores_a, scores_b) -> tuple[list[str], np.ndarray, np.ndarray, bool, str]:
    map_a, map_b = a.score_map(scores_a), b.score_map(scores_b)
    note = ""
    if map_a.shape != map_b.shape:
        grid = (max(map_a.shape[0], map_b.shape[0]), max(map_a.shape[1], map_b.shape[1]))
        note = f"patch grids differ ({map_a.shape[0]}x{map_a.shape[1]} vs {map_b.shape[0]}x{map_b.shape[1]}): " \
               f"both resampled bilinearly to {grid[0]}x{grid[1]}"
        map_a, map_b = _resample(map_a, grid), _resample(map_b, grid)
    rows, cols = map_a.shape
    units = [f"patch {r},{c}" for r in range(rows) for c in range(cols)]
    return units, map_a.ravel(), map_b.ravel(), False, note


def compare(a: Explanation, b: Explanation, *, scores_a: np.ndarray | None = None,
            scores_b: np.ndarray | None = None, k: int = 3) -> Comparison:
    """Put two explanations of one input on common units and measure agreement.

    `scores_a` / `scores_b` select another row than the final one (e.g. a layer of the slider).
    """
    if a.kind != b.kind:
        raise InputError("cannot compare a text explanation with an image explanation")
    make = _text_units if a.kind == "text" else _image_units
    units, va, vb, by_words, note = make(a, b, scores_a, scores_b)
    rho, rho_note = spearman(va, vb)
    return Comparison(units=units, a=va, b=vb, spearman=rho, k=min(k, len(units)),
                      top_k_overlap=top_k_overlap(va, vb, k), aligned_by_words=by_words,
                      note="; ".join(n for n in (note, rho_note) if n))


def agreement(a: Explanation, b: Explanation, **kwargs) -> dict[str, float | bool | int | str]:
    """The figures of `compare` as a flat dict (for tables and the CLI): Spearman and top-1/3/5 overlap."""
    result = compare(a, b, **kwargs)
    out: dict[str, float | bool | int | str] = {"spearman": result.spearman, "units": len(result.units),
                                                "aligned_by_words": result.aligned_by_words, "note": result.note}
    for k in (1, 3, 5):
        out[f"top_{k}_overlap"] = top_k_overlap(result.a, result.b, k)
    return out
