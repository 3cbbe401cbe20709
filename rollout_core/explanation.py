"""The `Explanation`: what every method returns for one input, and what pages, the CLI and notebooks show.

Its fields and data methods are `rollout_core.explanation_data.ExplanationData`'s; this class adds the views a user
calls on the object itself: `to_html` (one standalone page) and `_repr_html_` (notebooks). Those two draw with
`rollout_core.figures.standalone`, the one upward import the layering allows (tests/layering.py EXCEPTIONS).
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rollout_core.explanation_data import ExplanationData, Prediction, display_shares

__all__ = ["Explanation", "Prediction", "display_shares"]


@dataclass
class Explanation(ExplanationData):
    """One explained input (the fields and their shapes: `ExplanationData`), with its HTML views."""

    def to_html(self, path: str | os.PathLike[str] | None = None, **view: Any) -> str:
        """One standalone HTML page of this explanation with the layer slider (plotly.js inlined: works offline,
        opened by double-click), written to `path` when given; `view` (layer, raw_attention, figures, colormap,
        opacity) as in `rollout_core.figures.standalone.explorer_data`."""
        from rollout_core.figures.standalone import standalone_html

        page = standalone_html(self, **view)
        if path is not None:
            Path(path).write_text(page, encoding="utf-8")
        return page

    def _repr_html_(self) -> str:
        """Notebooks: the highlight (text) or overlay (image) with the layer slider, self-contained."""
        from rollout_core.figures.standalone import notebook_html

        return notebook_html(self)
