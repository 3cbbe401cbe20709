"""A corpus comparison as JSON values and as one standalone HTML report (offline: plotly.js inlined, no network).

Every piece of text from the data or the runs reaches the report escaped: tables through pandas' escaping, the
highlights through `corpus.views.row_highlight_html`, headings through `html.escape`, and the figures' JSON
cannot close its script element (`standalone.script_json`).
"""
from __future__ import annotations

import html
import json
from typing import Any

import numpy as np
import pandas as pd
import plotly.io as pio

from rollout_core.corpus.compare_rows import CELL, GROUPINGS, KINDS, patch_code
from rollout_core.corpus.comparison import CorpusComparison
from rollout_core.corpus.views import row_highlight_html
from rollout_core.figures import corpus_compare as figures
from rollout_core.figures.standalone import plotly_js, script_json

_STYLE = """
body{font-family:system-ui,-apple-system,'Segoe UI',Roboto,sans-serif;margin:1.2rem 2rem;color:#262730;background:#fff}
h1{font-size:1.4rem;margin:0 0 .4rem}h2{font-size:1.15rem;margin:1.6rem 0 .5rem;border-bottom:1px solid #ddd}
h3{font-size:1rem;margin:1rem 0 .4rem}.meta{opacity:.8;font-size:.92rem;margin:.1rem 0}
.summary{font-weight:600;margin:.6rem 0}table.data{border-collapse:collapse;font-size:.86rem;margin:.3rem 0 .8rem}
table.data th,table.data td{border:1px solid #ddd;padding:.2rem .5rem;text-align:left}
table.data th{background:#f4f4f6}.pair{display:grid;grid-template-columns:1fr 1fr;gap:1rem;margin:.3rem 0 1rem}
.pair>div{border:1px solid #e4e4e8;border-radius:6px;padding:.5rem .7rem;line-height:1.9}
.example{margin:.8rem 0 1.2rem}.example .meta{font-size:.86rem}
"""
_COLUMNS = {"examples": ["id", "class", "label", "prediction_a", "prediction_b", "probability_a", "probability_b",
                         "agree", "spearman", "top_k_overlap", "units", "units_a", "units_b"]}


def _records(frame: pd.DataFrame) -> list[dict[str, Any]]:
    """Rows as JSON values (NaN and None as null, numpy values as numbers, arrays as lists)."""
    if frame is None or frame.empty:
        return []
    return json.loads(frame.to_json(orient="records", double_precision=15))


def _grid(values: np.ndarray) -> list[list[float | None]]:
    return [[None if not np.isfinite(v) else float(v) for v in row] for row in np.asarray(values, dtype=np.float64)]


def _finite(value: Any) -> Any:
    if isinstance(value, float) and not np.isfinite(value):
        return None
    return value


def _shown(value: Any) -> str:
    if isinstance(value, float):
        return "–" if not np.isfinite(value) else f"{value:.4g}"
    return str(value)


def comparison_json(c: CorpusComparison) -> dict[str, Any]:
    """Every figure of `c` as JSON values: runs, settings, summary, classes, moved (with intervals), top lists,
    the most disagreeing rows (with both sides' units), image maps and the per-example table."""
    return {
        "runs": {"a": {"folder": c.a, "run": c.describe_a}, "b": {"folder": c.b, "run": c.describe_b}},
        "kind": c.kind, "grouped_by": c.by, "settings": c.settings,
        "summary": {k: _finite(v) for k, v in c.summary.items()}, "summary_line": c.summary_line(),
        "classes": _records(c.classes), "moved": _records(c.moved), "top_lists": _records(c.top_lists),
        "disagreements": {kind: _records(frame) for kind, frame in c.disagreements.items()},
        "maps": {cls: _grid(grid) for cls, grid in c.maps.items()},
        "examples": _records(c.examples[_COLUMNS["examples"]]),
    }


def _table(frame: pd.DataFrame, columns: list[str] | None = None) -> str:
    shown = frame if columns is None else frame[[c for c in columns if c in frame.columns]]
    return shown.to_html(index=False, escape=True, na_rep="–", classes="data", border=0,
                         float_format=lambda v: f"{v:.4g}")


def side_row(row: pd.Series, side: str) -> pd.Series:
    """One side of a disagreement row in the shape `row_highlight_html` draws."""
    words, scores = list(row[f"words_{side}"]), list(row[f"scores_{side}"])
    top = sorted(range(len(scores)), key=lambda i: -scores[i])[:5]
    return pd.Series({"kind": row["kind"], "id": row["id"], "text": row["text"], "words": words,
                      "starts": list(row[f"starts_{side}"]), "ends": list(row[f"ends_{side}"]), "scores": scores,
                      "top_words": [words[i] for i in top], "top_shares": [scores[i] for i in top]})


def patch_map(words: list[str], scores: list[float]) -> np.ndarray:
    """A row's stored patches ('patch r,c') and shares as a (rows, cols) map."""
    codes = np.array([patch_code(w) for w in words], dtype=np.int64)
    out = np.zeros((int(codes.max() // CELL) + 1, int((codes % CELL).max()) + 1)) if len(codes) else np.zeros((0, 0))
    out[codes // CELL, codes % CELL] = scores
    return out


def _example(row: pd.Series, figs: dict[str, Any], key: str) -> str:
    facts = (f"A: {row['prediction_a']} ({row['probability_a']:.1%}) · B: {row['prediction_b']} "
             f"({row['probability_b']:.1%}) · Spearman {row['spearman']:.3f} · top-k overlap "
             f"{row['top_k_overlap']:.2f} · {row['units']} units compared")
    head = (f'<div class="example"><h3>{html.escape(str(row["id"]))}</h3><p class="meta">{html.escape(facts)}'
            + (f" · label {html.escape(str(row['label']))}" if row.get("label") is not None else "") + "</p>")
    if row["kind"] == "image":
        figs[key] = figures.patch_pair_figure(patch_map(list(row["words_a"]), list(row["scores_a"])),
                                              patch_map(list(row["words_b"]), list(row["scores_b"])), str(row["id"]))
        return head + f'<div id="{key}"></div></div>'
    cells = "".join(f'<div><b>{side.upper()}</b><br>{row_highlight_html(side_row(row, side))}</div>' for side in "ab")
    return head + f'<div class="pair">{cells}</div></div>'


def report_html(c: CorpusComparison) -> str:
    """The whole report as one HTML string (see the module docstring)."""
    figs: dict[str, Any] = {"fig-spearman": figures.spearman_histogram(c.examples["spearman"].to_numpy())}
    parts = [
        f"<h1>Explanation diff over {c.summary['rows']} rows</h1>",
        f'<p class="meta">A: {html.escape(c.a)} ({html.escape(c.describe_a)})</p>',
        f'<p class="meta">B: {html.escape(c.b)} ({html.escape(c.describe_b)})</p>',
        f'<p class="summary">{html.escape(c.summary_line())}</p>',
        "<h2>Summary</h2>",
        _table(pd.DataFrame({"figure": list(c.summary), "value": [_shown(v) for v in c.summary.values()]})),
        f"<h2>Per class</h2><p class=\"meta\">Rows are grouped by {html.escape(GROUPINGS[c.by])}.</p>",
        _table(c.classes),
        "<h2>Rank correlation per row</h2>", '<div id="fig-spearman"></div>',
        f"<h2>{'Patches' if c.kind == 'image' else 'Words'} whose mean share moved most, per class</h2>",
        f'<p class="meta">Mean share over the occurrences in the class (each row renormalised over the units '
        f'both runs see); interval: {c.settings["level"]:.0%} Poisson bootstrap over rows, '
        f'{c.settings["replicates"]} replicates; units seen at least {c.settings["min_count"]} times.</p>',
    ]
    for index, (cls, group) in enumerate(c.moved.groupby("class", sort=True)):
        figs[f"fig-moved-{index}"] = figures.moved_units_figure(group, str(cls))
        parts += [f"<h3>{html.escape(str(cls))}</h3>", f'<div id="fig-moved-{index}"></div>',
                  _table(group, ["unit", "count", "mean_a", "mean_b", "diff", "low", "high"])]
    if c.moved.empty:
        parts.append('<p class="meta">No unit is seen often enough in any class.</p>')
    parts.append(f"<h2>Top {c.settings['top']} lists per class: entered and left</h2>")
    for cls, group in c.top_lists.groupby("class", sort=True):
        changed = group[group["change"] != "stayed"]
        parts += [f"<h3>{html.escape(str(cls))}</h3>",
                  _table(changed, ["unit", "change", "rank_a", "rank_b", "mean_a", "mean_b", "count"])
                  if len(changed) else '<p class="meta">The same units in both top lists.</p>']
    if c.maps:
        parts.append("<h2>Mean difference maps per class (B - A)</h2>")
        for index, (cls, grid) in enumerate(sorted(c.maps.items())):
            figs[f"fig-map-{index}"] = figures.difference_map_figure(grid, cls)
            parts.append(f'<div id="fig-map-{index}"></div>')
    for kind, title in KINDS.items():
        frame = c.disagreements.get(kind, pd.DataFrame())
        parts.append(f"<h2>Rows where {html.escape(title)}</h2>")
        if frame.empty:
            parts.append('<p class="meta">None.</p>')
        for index, (_, row) in enumerate(frame.iterrows()):
            parts.append(_example(row, figs, f"fig-{kind}-{index}"))
    data = {key: json.loads(pio.to_json(fig, validate=False)) for key, fig in figs.items()}
    title = f"Explanation diff: {c.describe_a} vs {c.describe_b}"
    return ('<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
            f"<title>{html.escape(title)}</title><style>{_STYLE}</style><script>{plotly_js()}</script></head><body>"
            + "\n".join(parts)
            + f'<script type="application/json" id="figures">{script_json(data)}</script>'
            "<script>const figures = JSON.parse(document.getElementById('figures').textContent);"
            "for (const [id, fig] of Object.entries(figures)) {"
            "Plotly.newPlot(id, fig.data, fig.layout, {responsive: true, displaylogo: false});}</script>"
            "</body></html>\n")
