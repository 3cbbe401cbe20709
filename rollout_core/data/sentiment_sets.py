"""The labelled example type of rollout_core.data.sentiment and the hand-written sets beside it.

natural_sentences.csv and natural_sentences_blind.csv: one sentence each, with the deciding words;
mixed_reviews.csv: 30 multi-sentence reviews (mixed ones, "my only complaint ...", neutral statements
labelled by their lean), written before the generator learned longer reviews, with labels only.
reviews_blind.csv: 64 everyday reviews (issue 27: concessions, contrast across sentences, sarcasm, implied
outcomes; 32 per label), written and committed before any model of that issue was trained; never used to tune.
reviews_validation.csv: 96 more everyday reviews (the issue's own examples among them) and 25 NEUTRAL statements,
the natural-like validation set that calibration and model choice may be fitted on.
neutral_sentences.csv: 48 statements of fact, schedules and news (one column, text): the neutral-confidence measure.
"""
from __future__ import annotations

import csv
import re
from dataclasses import dataclass
from pathlib import Path

POSITIVE = "POSITIVE"
NEGATIVE = "NEGATIVE"
LABELS = (NEGATIVE, POSITIVE)
NATURAL_CSV = Path(__file__).resolve().parent / "natural_sentences.csv"
# A second hand-written set, written and committed before the implied-sentiment templates were added and
# never used to choose them: the honest measure of generalisation to natural text.
NATURAL_BLIND_CSV = NATURAL_CSV.with_name("natural_sentences_blind.csv")
NATURAL_SETS = {"natural": NATURAL_CSV, "natural_blind": NATURAL_BLIND_CSV}
MIXED_REVIEWS_CSV = NATURAL_CSV.with_name("mixed_reviews.csv")
REVIEWS_BLIND_CSV = NATURAL_CSV.with_name("reviews_blind.csv")
REVIEWS_VALIDATION_CSV = NATURAL_CSV.with_name("reviews_validation.csv")
NEUTRAL_CSV = NATURAL_CSV.with_name("neutral_sentences.csv")
NEUTRAL = "NEUTRAL"


@dataclass(frozen=True)
class TextExample:
    """One sentence, its label ("POSITIVE"/"NEGATIVE") and the character spans of the deciding words."""

    text: str
    label: str
    evidence: list[tuple[int, int]]


def evidence_spans(text: str, words: list[str]) -> list[tuple[int, int]]:
    """Character spans of `words` (words or phrases) in `text`, each the next unused whole-word match."""
    spans: list[tuple[int, int]] = []
    for word in words:
        pattern = re.compile(r"(?<!\w)" + re.escape(word) + r"(?!\w)", re.IGNORECASE)
        match = next((m for m in pattern.finditer(text) if m.span() not in spans), None)
        if match is None:
            raise ValueError(f"evidence {word!r} is not a whole word of {text!r}")
        spans.append(match.span())
    return sorted(spans)


def _rows(path: Path, labels: tuple[str, ...] = LABELS) -> list[dict]:
    with open(path, newline="", encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))
    for row in rows:
        if row["label"] not in labels:
            raise ValueError(f"label must be one of {labels}: {row}")
    return rows


def natural(path: Path = NATURAL_CSV) -> list[TextExample]:
    """The hand-written natural sentences (columns text, label, evidence with words separated by "|")."""
    return [TextExample(row["text"], row["label"],
                        evidence_spans(row["text"], [w.strip() for w in row["evidence"].split("|") if w.strip()]))
            for row in _rows(path)]


def mixed_reviews(path: Path = MIXED_REVIEWS_CSV) -> list[TextExample]:
    """Hand-written reviews with labels only (columns text, label; no evidence): the 30 mixed reviews by default,
    or another such file (REVIEWS_BLIND_CSV)."""
    return [TextExample(row["text"], row["label"], []) for row in _rows(path)]


def validation_reviews(path: Path = REVIEWS_VALIDATION_CSV) -> tuple[list[TextExample], list[str]]:
    """The natural-like validation set: its labelled reviews, and its NEUTRAL statements (texts)."""
    rows = _rows(path, LABELS + (NEUTRAL,))
    return ([TextExample(row["text"], row["label"], []) for row in rows if row["label"] != NEUTRAL],
            [row["text"] for row in rows if row["label"] == NEUTRAL])


def neutral_sentences(path: Path = NEUTRAL_CSV) -> list[str]:
    """The hand-written neutral statements (facts, schedules, news): text only, no label."""
    with open(path, newline="", encoding="utf-8") as handle:
        return [row["text"] for row in csv.DictReader(handle)]
