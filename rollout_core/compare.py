"""Comparing two explanations of the same input: alignment, rank correlation, top-k overlap.

Two models rarely share a tokenizer. When the shown tokens differ, both explanations are mapped onto
the words of the text by character offsets (a word's score is the SUM of its tokens' scores: scores
are shares of the prediction, and shares add up, so a word split into three pieces keeps its whole
share). Image maps on different patch grids are resampled onto the finer grid.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Sequence

import numpy as np
import torch

from rollout_core.errors import InputError
from rollout_core.explanation_data import ExplanationData, display_shares
from rollout_core.maths.ranks import spearman as _rank_correlation

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


def token_spans(expl: ExplanationData) -> list[tuple[int, int, int]]:
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


def word_scores(expl: ExplanationData, scores: np.ndarray | None = None) -> list[tuple[str, int, int, float]]:
    """Shown token scores summed onto the words of the text they overlap, renormalised to sum to 1.

    A word's score is the SUM of its tokens' scores: scores are shares of one mass, so the pieces of a
    word together hold its share, whatever number of pieces a tokenizer cut it into (a mean or max would
    make two tokenizers disagree about the same word). A token overlapping several words (rare:
    byte-level merges) is split between them evenly; tokens covering no word (whitespace) are left out.
    """
    if expl.text is None or expl.offsets is None:
        raise InputError("word scores need a text explanation with character offsets")
    return word_shares(expl.text, expl.offsets, expl.special, expl.scores if scores is None else scores,
                       expl.signed)


def word_shares(text: str, offsets: Sequence[tuple[int, int]], special: Sequence[bool] | np.ndarray,
                scores: np.ndarray, signed: bool = False) -> list[tuple[str, int, int, float]]:
    """`word_scores` from the parts of a text explanation: every position's offsets, special flags and scores
    (`signed` ones keep their signs and are divided by the sum of their sizes, as `display_shares` does)."""
    spans = words(text)
    shown = display_shares(scores, special, signed)
    keep = np.flatnonzero(~np.asarray(special, dtype=bool))
    tokens = np.asarray(offsets, dtype=np.int64).reshape(-1, 2)[keep]
    words_ = np.array([(s, e) for _, s, e in spans], dtype=np.int64).reshape(-1, 2)
    hits = ((words_[None, :, 0] < tokens[:, 1:]) & (words_[None, :, 1] > tokens[:, :1])
            & (tokens[:, 1:] > tokens[:, :1]))  # (token, word): the token's characters overlap the word's
    count = hits.sum(1)
    totals = np.divide(shown, count, out=np.zeros_like(shown), where=count > 0) @ hits
    total = np.abs(totals).sum() if signed else totals.sum()
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
    return _rank_correlation(a, b), ""


def top_k_overlap(a: np.ndarray, b: np.ndarray, k: int) -> float:
    """|top-k(a) ∩ top-k(b)| / k, ties broken by position."""
    k = min(k, len(a))
    if k <= 0:
        return float("nan")
    top_a = set(np.argsort(-np.asarray(a), kind="stable")[:k].tolist())
    top_b = set(np.argsort(-np.asarray(b), kind="stable")[:k].tolist())
    return len(top_a & top_b) / k


def align_words(a: ExplanationData, b: ExplanationData, scores_a: np.ndarray | None = None,
                scores_b: np.ndarray | None = None) -> list[tuple[str, int, int, float, float]]:
    """(word, start, end, score_a, score_b) for the words of the text that both explanations saw.

    Words come from the characters, so this works whatever the two tokenizers. The texts must be the
    same, except that one may be a truncated prefix of the other: then only the words inside both are
    returned (and each side's word scores are renormalised over them).
    """
    if a.text is None or b.text is None or not (a.text.startswith(b.text) or b.text.startswith(a.text)):
        raise InputError("the two explanations are of different texts")
    common = min(len(a.text), len(b.text))
    wa = [w for w in word_scores(a, scores_a) if w[2] <= common]
    wb = {(s, e): v for _, s, e, v in word_scores(b, scores_b) if e <= common}
    rows = [(w, s, e, va, wb[(s, e)]) for w, s, e, va in wa if (s, e) in wb]
    total_a, total_b = sum(r[3] for r in rows), sum(r[4] for r in rows)
    return [(w, s, e, va / total_a if total_a > 0 else va, vb / total_b if total_b > 0 else vb)
            for w, s, e, va, vb in rows]


def _text_units(a: ExplanationData, b: ExplanationData, scores_a, scores_b
                ) -> tuple[list[str], np.ndarray, np.ndarray, bool, str]:
    same_tokens = a.text == b.text and a.display_tokens() == b.display_tokens() and (
        a.offsets is None or b.offsets is None
        or [a.offsets[i] for i in a.display_positions()] == [b.offsets[i] for i in b.display_positions()]
    )
    if same_tokens:
        return a.display_tokens(), a.display_scores(scores_a), b.display_scores(scores_b), False, ""
    rows = align_words(a, b, scores_a, scores_b)
    note = "the tokenizers differ: scores were summed onto words by character offsets"
    if a.text != b.text:
        note += f"; the texts were truncated to different lengths, so only the {len(rows)} words both saw are compared"
    return [r[0] for r in rows], np.array([r[3] for r in rows]), np.array([r[4] for r in rows]), True, note


def resample_maps(maps: np.ndarray, grid: tuple[int, int]) -> np.ndarray:
    """A (rows, cols) score map, or a stack of them (n, rows, cols), resampled bilinearly onto `grid` and each
    renormalised to sum to 1 (a map of zeros stays zeros)."""
    values = np.asarray(maps, dtype=np.float64)
    tensor = torch.from_numpy(np.ascontiguousarray(values.reshape(-1, 1, *values.shape[-2:])))
    out = torch.nn.functional.interpolate(tensor, size=grid, mode="bilinear", align_corners=False)[:, 0].numpy()
    totals = out.sum(axis=(1, 2), keepdims=True)
    out = np.divide(out, totals, out=out.copy(), where=totals > 0)
    return out.reshape(*values.shape[:-2], *grid)


def _image_units(a: ExplanationData, b: ExplanationData, scores_a, scores_b
                 ) -> tuple[list[str], np.ndarray, np.ndarray, bool, str]:
    map_a, map_b = a.score_map(scores_a), b.score_map(scores_b)
    note = ""
    if map_a.shape != map_b.shape:
        grid = (max(map_a.shape[0], map_b.shape[0]), max(map_a.shape[1], map_b.shape[1]))
        coarser = "A" if map_a.size < map_b.size else "B"
        note = f"patch grids differ ({map_a.shape[0]}x{map_a.shape[1]} vs {map_b.shape[0]}x{map_b.shape[1]}): " \
               f"the coarser map ({coarser}) was resampled bilinearly to {grid[0]}x{grid[1]} and renormalised"
        map_a, map_b = resample_maps(map_a, grid), resample_maps(map_b, grid)
    rows, cols = map_a.shape
    units = [f"patch {r},{c}" for r in range(rows) for c in range(cols)]
    return units, map_a.ravel(), map_b.ravel(), False, note


def compare(a: ExplanationData, b: ExplanationData, *, scores_a: np.ndarray | None = None,
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


def agreement(a: ExplanationData, b: ExplanationData, **kwargs) -> dict[str, float | bool | int | str]:
    """The figures of `compare` as a flat dict for the comparison page, tables and the CLI.

    Keys: "spearman" (NaN when undefined, "note" says why), "top_1_overlap", "top_3_overlap",
    "top_5_overlap", "unit" ("token" | "word" | "patch"), "units" (how many were compared),
    "tokenizers_differ" (text compared per word because the tokens differ), "aligned_by_words"
    (same), "note" (alignment, resampling or why a figure is undefined).
    """
    result = compare(a, b, **kwargs)
    unit = "patch" if a.kind == "image" else ("word" if result.aligned_by_words else "token")
    out: dict[str, float | bool | int | str] = {
        "spearman": result.spearman, "unit": unit, "units": len(result.units),
        "tokenizers_differ": result.aligned_by_words, "aligned_by_words": result.aligned_by_words,
        "note": result.note,
    }
    for k in (1, 3, 5):
        out[f"top_{k}_overlap"] = top_k_overlap(result.a, result.b, k)
    return out
