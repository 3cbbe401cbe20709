"""Display helpers for result rows: escaped word highlight, the per-class word chart, and top-word-in-evidence
rate."""
from __future__ import annotations

import html
from pathlib import Path
from typing import Any, Mapping, Sequence

import pandas as pd

from rollout_core.corpus.folder import MANIFEST
from rollout_core.figures._common import visible
from rollout_core.inputs.text import normalise_text


def result_folders(root: Path) -> list[Path]:
    """Result folders (holding a manifest and chunks) directly inside `root`, newest first."""
    if not root.is_dir():
        return []
    found = [p for p in root.iterdir() if p.is_dir() and (p / MANIFEST).is_file() and any(p.glob("chunk-*.parquet"))]
    return sorted(found, key=lambda p: p.stat().st_mtime, reverse=True)


def row_highlight_html(row: pd.Series, marker: str | None = None) -> str:
    """The row's text with each word's background alpha set by its share; `marker` (a lower-cased word)
    is underlined. Image rows: their id and top patches. All user text is HTML-escaped; shares in titles."""
    if row.get("kind") == "image":
        tops = ", ".join(f"{html.escape(str(w))} {s:.0%}" for w, s in zip(row["top_words"], row["top_shares"]))
        return f"<b>{html.escape(str(row['id']))}</b>: {tops}"
    text, scores = normalise_text(str(row["text"])), list(row["scores"])  # the text the spans were taken from
    top = max(scores) if scores else 0.0
    parts, cursor = [], 0
    for word, start, end, share in zip(row["words"], row["starts"], row["ends"], scores):
        parts.append(html.escape(text[cursor:start]))
        alpha = 0.0 if top <= 0 else share / top
        style = f"background: rgba(220,60,40,{alpha:.2f})"
        if marker is not None and str(word).lower() == marker:
            style += "; text-decoration: underline; font-weight: bold"
        parts.append(f'<span style="{style}" title="{share:.3f}">{html.escape(text[start:end])}</span>')
        cursor = end
    parts.append(html.escape(text[cursor:]))
    return "".join(parts)


def plot_text(value: object) -> str:
    """`value` as Plotly shows it literally: Plotly reads a subset of HTML in titles, ticks and hovers (not
    Markdown), so `<`, `>` and `&` are escaped and control characters written as their codes."""
    return html.escape(visible(str(value)), quote=False)


def word_share_figure(table: pd.DataFrame, label: object, least: int) -> Any:
    """Bar chart of the top `class_tokens` rows (word, mean_share, count, top1_share) for the predicted class
    `label`, words seen at least `least` times."""
    import plotly.express as px

    seen = "seen at least once" if least == 1 else f"seen at least {least} times"
    shown = table.assign(word=[plot_text(w) for w in table["word"]])
    return px.bar(shown, x="word", y="mean_share", hover_data=["count", "top1_share"],
                  labels={"word": "word (lower-cased)", "mean_share": "mean share of the explanation"},
                  title=f"Words the model leans on for {plot_text(label)} ({seen}; top {len(table)})")


def evidence_hit_rate(results: pd.DataFrame, evidence: Mapping[str, Sequence[tuple[int, int]]]) -> float:
    """Fraction of rows (with evidence) whose top word overlaps one of its evidence character spans."""
    hits = total = 0
    for row in results.itertuples(index=False):
        spans = evidence.get(row.id)
        if not spans or len(row.scores) == 0:
            continue
        best = max(range(len(row.scores)), key=list(row.scores).__getitem__)
        start, end = row.starts[best], row.ends[best]
        total += 1
        hits += any(start < e and end > s for s, e in spans)
    return hits / total if total else float("nan")
