"""Attention rollout dashboard: home page and navigation (run with `streamlit run app.py`)."""
from __future__ import annotations

import streamlit as st

from app_pages._lib.safe import safe_text
from rollout_core.serving.malloc import limit_heap_growth
from rollout_core.settings import SettingsError, check_settings

limit_heap_growth()  # large arrays freed by the result cache go back to the system (rollout_core.serving.malloc)

st.set_page_config(page_title="Attention rollout", layout="wide")
try:
    check_settings()  # a bad ROLLOUT_* value: one message naming it, on every page, instead of a traceback later
except SettingsError as err:
    st.error(safe_text(err))
    st.stop()


def home() -> None:
    st.title("Attention rollout dashboard")
    st.markdown(
        """
Which input tokens or image patches does a transformer's output draw on? **Attention rollout**
(Abnar & Zuidema, 2020) follows the attention through every layer: each layer's heads are fused,
the residual connection is added and rows are renormalised, Ã_l = rownorm(A_l + w·I), and the
layers are multiplied **later layers on the left**:

  R = Ã_L · Ã_(L−1) · … · Ã_1,   R[i, j] = share of input j in output i.

The layer slider on each page shows R_l = Ã_l · … · Ã_1, the rollout up to layer l, or layer l's
own attention. Also here: **attention flow** (max-flow through the same graph), **gradient-weighted
rollout** (Chefer et al. 2021; class-specific) and **raw attention**.

- **Text**: a sentence through a text model (sentiment classifier, sentence encoder, any hub model).
- **Image**: an uploaded photo or a bundled example through a ViT (or the DINOv2 backbone).
- **Compare**: two models, or two methods, on the same input: same colour scale, difference, agreement.
- **Evaluate**: how faithful the maps are (deletion / insertion, pointing game against known regions).

Every setting is kept in the address bar: copy the link to share exactly this view.
"""
    )


# The page scripts live in app_pages/, not pages/: with a pages/ folder beside app.py, Streamlit runs in its
# old folder mode until "/" has been visited once, so a shared link to /text on a fresh server would skip this file.
pages = [
    st.Page(home, title="Home", icon=":material/home:", default=True),
    st.Page("app_pages/text.py", title="Text", icon=":material/notes:", url_path="text"),
    st.Page("app_pages/image.py", title="Image", icon=":material/image:", url_path="image"),
    st.Page("app_pages/compare.py", title="Compare", icon=":material/compare:", url_path="compare"),
    st.Page("app_pages/evaluate.py", title="Evaluate", icon=":material/straighten:", url_path="evaluate"),
    st.Page("app_pages/corpus.py", title="Corpus", icon=":material/dataset:", url_path="corpus"),
]
st.navigation(pages).run()
