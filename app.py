"""Attention rollout dashboard: home page and navigation (run with `streamlit run app.py`)."""
from __future__ import annotations

import streamlit as st

from app_pages._lib.safe import safe_text
from rollout_core import methods
from rollout_core.models import measured
from rollout_core.serving.kernels import start_flow_kernels
from rollout_core.serving.malloc import limit_heap_growth
from rollout_core.settings import SettingsError, check_settings

limit_heap_growth()  # large arrays freed by the result cache go back to the system (rollout_core.serving.malloc)

st.set_page_config(page_title="Attention rollout", layout="wide")
try:
    check_settings()  # a bad ROLLOUT_* value: one message naming it, on every page, instead of a traceback later
except SettingsError as err:
    st.error(safe_text(err))
    st.stop()


PAGES = (  # script, title, icon, URL path, what it is for (the navigation and the home page's list)
    ("app_pages/text.py", "Text", ":material/notes:", "text",
     "type a sentence: the prediction, each token's share, the layer slider, the final matrix and every head"),
    ("app_pages/image.py", "Image", ":material/image:", "image",
     "upload an image or pick an example: the map over it, the patch grid and the same layer slider"),
    ("app_pages/compare.py", "Compare", ":material/compare:", "compare",
     "two models, or one model with two methods, on the same input: one colour scale, the difference, agreement"),
    ("app_pages/evaluate.py", "Evaluate", ":material/straighten:", "evaluate",
     "how faithful each method is on this input: deletion and insertion curves against a random ordering"),
    ("app_pages/corpus.py", "Corpus", ":material/dataset:", "corpus",
     "a whole data set: the words each predicted class leans on, with examples and how often they hit the evidence"),
)


def _figures(measured: dict | None) -> str:
    if not measured:
        return "–"
    return " / ".join("–" if measured[k] is None else f"{measured[k]:.2f}" for k in ("pointing_game", "deletion_auc"))


def _method_table() -> str:
    """Every registered method, from the registry: what it is, when to use it, its inputs, the measured figures."""
    rows = methods.table()
    models = list(rows[0]["measured"]) if rows else []
    defaults = {model: measured.default_method(model, methods.names()) for model in models}
    head = ["method", "when to use it", "inputs", "class-specific",
            *(f"{model}: pointing ↑ / deletion ↓" for model in models)]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for row in rows:
        spec = methods.get(row["name"])
        cells = [f"**{spec.title}** (`{spec.name}`)", spec.use_when or spec.description, ", ".join(spec.modalities),
                 "yes" if spec.class_specific else "no",
                 *(_figures(row["measured"][m]) + (" **(default)**" if defaults[m] == spec.name else "")
                   for m in models)]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def home() -> None:
    st.title("Attention rollout dashboard")
    st.markdown(
        "Which input tokens or image patches does a transformer's output draw on? **Attention rollout** (Abnar & "
        "Zuidema 2020) follows the attention through every layer, heads fused and the residual added, layers "
        "multiplied later ones on the left: R = Ã_L · … · Ã_1, R[i, j] = share of input j in output i. Its relatives "
        "below answer the same question in other ways. Every setting is kept in the address bar: copy the link to "
        "share exactly this view."
    )
    st.subheader("Pages")
    for page, (_, title, _, _, purpose) in zip(pages[1:], PAGES):
        left, right = st.columns([1, 5])
        left.page_link(page, label=title, icon=page.icon)
        right.markdown(purpose)
    st.subheader("Methods")
    st.markdown(_method_table())
    st.caption("Pointing game: how often the top token or patch lies in the known deciding region of the default "
               "model's generated test set (higher is better); deletion: area under the class probability as the "
               "top-ranked inputs are removed (lower is better); – not measured. Without a method chosen, each "
               "embedded model runs the one it measured best, marked (default); a model without figures runs "
               "attention rollout.")


# The page scripts live in app_pages/, not pages/: with a pages/ folder beside app.py, Streamlit runs in its
# old folder mode until "/" has been visited once, so a shared link to /text on a fresh server would skip this file.
pages = [st.Page(home, title="Home", icon=":material/home:", default=True)] + [
    st.Page(script, title=title, icon=icon, url_path=url) for script, title, icon, url, _ in PAGES]
st.navigation(pages).run()
start_flow_kernels()  # once per process, after the page is drawn: the first flow then costs what later ones do
