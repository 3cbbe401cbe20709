"""One explanation as a self-contained HTML page: the app's layer explorer without a server.

The page carries every slider position (as numbers, from `layer_views`), the explorer's own JS and CSS (the very
files the dashboard mounts, layer_colours.js, layer_explorer.js/.css beside this module) and, when it has figures,
plotly.js inlined from the installed plotly package: it works offline, opened by double-click. All user text
reaches the page escaped: the explorer draws token texts as text nodes, the title is escaped here, and the JSON
data cannot close its script element (every "<" is written as \\u003c).
"""
from __future__ import annotations

import html
import json
import os
import tempfile
import webbrowser
from functools import lru_cache
from pathlib import Path
from typing import Any

from rollout_core.errors import InputError
from rollout_core.explanation_data import ExplanationData
from rollout_core.figures import layer_views
from rollout_core.figures._common import one_map, raw_label, raw_slider_label, slider_label
from rollout_core.figures.explorer_payload import ExplorerData
from rollout_core.figures.image import DEFAULT_COLORMAP

DEFAULT_OPACITY = 0.5
_MODULE_EXPORT = "export default function (component)"
_PAGE_STYLE = ("body{font-family:system-ui,-apple-system,'Segoe UI',Roboto,sans-serif;margin:1rem 1.5rem;"
               "color:#262730;background:#fff}.lx-head{margin:0 0 0.3rem;font-size:1.1rem}"
               ".lx-meta{margin:0 0 0.8rem;font-size:0.9rem;opacity:0.8}")
# Sizes a notebook's iframe to the page (same-origin srcdoc frame); a plain browser tab has no frameElement.
_FIT_FRAME = ("(function(){const fit=()=>{const f=window.frameElement;if(f)f.style.height="
              "(document.documentElement.scrollHeight+4)+'px';};new ResizeObserver(fit).observe(document.body);"
              "fit();})();")


def explorer_asset(kind: str) -> str:
    """The explorer's "js" (its colour functions, layer_colours.js, then layer_explorer.js) or "css" source, as
    the dashboard's component mounts it."""
    here = Path(__file__).parent
    names = ["layer_colours.js", "layer_explorer.js"] if kind == "js" else [f"layer_explorer.{kind}"]
    return "\n".join((here / name).read_text(encoding="utf-8") for name in names)


@lru_cache(maxsize=1)
def plotly_js() -> str:
    import plotly

    return (Path(plotly.__file__).parent / "package_data" / "plotly.min.js").read_text(encoding="utf-8")


def _classic_script() -> str:
    """The explorer module as a classic script defining `window.rolloutLayerExplorer` (file:// pages cannot
    import modules, and inline module scripts cannot export)."""
    source = explorer_asset("js")
    if source.count(_MODULE_EXPORT) != 1:
        raise RuntimeError(f"layer_explorer.js must contain {_MODULE_EXPORT!r} exactly once")
    return source.replace(_MODULE_EXPORT, "window.rolloutLayerExplorer = function (component)")


def script_json(value: Any) -> str:
    """JSON that is safe inside a <script> element: no "<" (so no "</script>"), no raw line separators."""
    text = json.dumps(value, ensure_ascii=False, allow_nan=False)
    return text.replace("<", "\\u003c").replace("\u2028", "\\u2028").replace("\u2029", "\\u2029")


def explorer_data(expl: ExplanationData, *, layer: int | None = None, raw_attention: bool = False,
                  figures: bool = True, colormap: str = DEFAULT_COLORMAP,
                  opacity: float = DEFAULT_OPACITY) -> ExplorerData:
    """The explorer's `data` for `expl`, starting at layer index `layer` (None: the last layer) in the given
    mode; `figures=False` leaves the Plotly figures out (text: the highlight and summary only)."""
    position = expl.num_layers if layer is None else int(layer) + 1
    if not 1 <= position <= expl.num_layers:
        raise InputError(f"Layer index {layer} is outside 0..{expl.num_layers - 1}.")
    if expl.kind == "image":
        payload = layer_views.image_payload(expl, colormap=colormap, figures=figures)
        controls = [layer_views.OVERLAY_OPACITY.spec(opacity)]
    else:
        payload, controls = layer_views.text_payload(expl, figures=figures), []
    return {"payload": payload, "layers": expl.num_layers, "layer": position,
            "raw": bool(raw_attention), "label": slider_label(expl.method),
            "raw_slider_label": raw_slider_label(expl.method), "raw_label": raw_label(expl.method),
            "one_map": one_map(expl.method),
            "plotly_url": "inline" if figures else "", "controls": controls, "identity": "", "url": None}


def _heading(expl: ExplanationData) -> tuple[str, str]:
    """(title, escaped one-line description) of the page."""
    title = f"{expl.method} · {expl.model_name}"
    facts = [f"explained: {expl.target_description}"]
    if expl.prediction:
        top = expl.prediction[0]
        facts.insert(0, f"closest label: {top.label} (cosine similarity {top.similarity:.2f})"
                     if top.similarity is not None else f"prediction: {top.label} ({top.probability:.1%})")
    return title, html.escape(" · ".join(facts))


def standalone_html(expl: ExplanationData, *, figures: bool = True, **view: Any) -> str:
    """The whole page as one string (see the module docstring); `view` as in `explorer_data`."""
    data = explorer_data(expl, figures=figures, **view)
    title, meta = _heading(expl)
    plotly = f"<script>{plotly_js()}</script>" if figures else ""
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f"<title>{html.escape(title)}</title><style>{_PAGE_STYLE}{explorer_asset('css')}</style>{plotly}</head>"
        f'<body><h1 class="lx-head">{html.escape(title)}</h1><p class="lx-meta">{meta}</p>'
        f'<div id="explorer"></div><script type="application/json" id="explorer-data">{script_json(data)}</script>'
        f"<script>{_classic_script()}</script>"
        "<script>window.rolloutLayerExplorer({data: JSON.parse(document.getElementById('explorer-data').textContent),"
        " parentElement: document.getElementById('explorer'), setStateValue: () => {}});"
        f"{_FIT_FRAME}</script></body></html>\n"
    )


def notebook_html(expl: ExplanationData) -> str:
    """What a notebook shows for `expl`: the standalone page in an iframe (its own scripts and styles, so it
    neither needs nor disturbs the notebook's). Text without the bar charts, so no plotly.js (small); images
    with the overlay and patch grid, plotly.js inlined."""
    page = standalone_html(expl, figures=expl.kind == "image")
    return (f'<iframe class="rollout-explorer" srcdoc="{html.escape(page, quote=True)}" '
            'style="width:100%;height:32rem;border:0" title="rollout explanation"></iframe>')


def show(expl: ExplanationData, path: str | os.PathLike[str] | None = None, *, open_browser: bool = True,
         **view: Any) -> Path:
    """Write the standalone page (to `path`, default a new file in the temp folder) and open it in the web
    browser; return the file's path."""
    if path is None:
        handle, name = tempfile.mkstemp(prefix=f"rollout-{expl.method}-", suffix=".html")
        os.close(handle)
        path = name
    target = Path(path)
    expl.to_html(target, **view)
    if open_browser:
        webbrowser.open(target.resolve().as_uri())
    return target
