"""Per-class word statistics over explained rows."""
from __future__ import annotations

import pandas as pd


def word_table(results: pd.DataFrame) -> pd.DataFrame:
    """One row per (row id, word occurrence): id, prediction, word (lower-cased), share, is_top."""
    records = []
    for row in results.itertuples(index=False):
        scores = list(row.scores)
        top = max(range(len(scores)), key=scores.__getitem__) if scores else -1
        for i, (word, share) in enumerate(zip(row.words, scores)):
            records.append((row.id, row.prediction, str(word).lower(), float(share), i == top))
    return pd.DataFrame(records, columns=["id", "prediction", "word", "share", "is_top"])


def class_tokens(results: pd.DataFrame, min_count: int = 1) -> pd.DataFrame:
    """Per predicted class and lower-cased word: mean share, count and top-1 share (fraction of the
    word's occurrences where it held the row's largest share), sorted by mean share."""
    words = word_table(results)
    grouped = words.groupby(["prediction", "word"]).agg(
        mean_share=("share", "mean"), count=("share", "size"), top1_share=("is_top", "mean")).reset_index()
    grouped = grouped[grouped["count"] >= min_count]
    return grouped.sort_values(["prediction", "mean_share"], ascending=[True, False]).reset_index(drop=True)


def examples_for(results: pd.DataFrame, word: str, prediction: str | None = None) -> pd.DataFrame:
    """Rows in which `word` (case-insensitive) is the top word, optionally of one predicted class."""
    words = word_table(results)
    hit = words[(words["word"] == word.lower()) & words["is_top"]]
    if prediction is not None:
        hit = hit[hit["prediction"] == prediction]
    return results[results["id"].isin(set(hit["id"]))]
