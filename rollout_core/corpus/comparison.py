"""The result of comparing two corpus runs (`compare_runs.compare_runs`): tables and figures, no behaviour but the
summary line. `compare_report` turns it into JSON values and the HTML report."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd


@dataclass
class CorpusComparison:
    """Two runs compared. Shares are each row's explanation renormalised over the units (words or patches) both
    runs see; "diff" is B minus A. Tables:
    - examples: one row per example (id, class, label, both predictions and probabilities, agree, spearman,
      top_k_overlap, units compared and each side's unit count), in A's stored order;
    - classes: per class (rows grouped by `by`), rows, prediction agreement, Spearman median, mean top-k overlap;
    - units: per class and unit seen at least `min_count` times: count, mean_a, mean_b, diff;
    - moved: per class, the `top` units of largest |diff|, with a bootstrap interval (low, high) over rows;
    - top_lists: per class, the `top` units by mean share in A and in B, and whether each entered, left or stayed;
    - disagreements: per kind (`compare_rows.KINDS`), the most disagreeing rows with both sides' units;
    - maps (image runs): per class, the mean difference map B - A on the patch grid."""

    a: str
    b: str
    describe_a: str
    describe_b: str
    kind: str
    by: str
    summary: dict[str, Any]
    examples: pd.DataFrame
    classes: pd.DataFrame
    units: pd.DataFrame
    moved: pd.DataFrame
    top_lists: pd.DataFrame
    disagreements: dict[str, pd.DataFrame]
    maps: dict[str, np.ndarray] = field(default_factory=dict)
    settings: dict[str, Any] = field(default_factory=dict)
    manifest_a: dict[str, Any] | None = None  # what each run recorded (model, method, ...); None: not recorded
    manifest_b: dict[str, Any] | None = None

    def summary_line(self) -> str:
        """Rows, prediction agreement, median and quartiles of the rank correlation, in one line."""
        s = self.summary
        rho = ("Spearman undefined on every row" if s["spearman_rows"] == 0 else
               f"Spearman median {s['spearman_median']:.3f} (quartiles {s['spearman_q1']:.3f} to "
               f"{s['spearman_q3']:.3f}, {s['spearman_rows']} rows with a defined correlation)")
        return (f"{s['rows']} rows · predictions agree on {s['agreement']:.1%} · {rho} · "
                f"top-{s['k']} overlap {s['top_k_overlap']:.3f}")
