"""Image page: explain an uploaded or bundled image with a ViT-family model."""
from __future__ import annotations

import functools

import streamlit as st

from app_pages._lib import core, views
from app_pages._lib.inputs import image_input
from app_pages._lib.layer_explorer import image_payload, layer_explorer, shared_scale_toggle
from app_pages._lib.safe import safe_text
from app_pages._lib.sidebar import model_and_method
from app_pages._lib.trust import photo_model_offer, trust_line
from app_pages._lib.state import param, sync_url
from rollout_core import figures, methods
from rollout_core.explanation import Explanation
from rollout_core.figures.image import DEFAULT_COLORMAP
from rollout_core.figures.layer_views import DEFAULT_OPACITY, OVERLAY_OPACITY

st.title("Image")

choice = image_input()
image_bytes, source = choice.data, choice.name

name, allow_pickle, method, target = model_and_method("image", source=image_bytes)

param("cmap", DEFAULT_COLORMAP, figures.COLORMAPS)
scale_col, shared_col = st.columns(3)[:2]
scale = scale_col.selectbox("Colour map", figures.COLORMAPS, key="cmap")
with shared_col:
    shared = shared_scale_toggle()

fetch = functools.partial(core.explain_image, name, allow_pickle, image_bytes, method, target)


@st.fragment
def layer_view(fetch: functools.partial, scale: str) -> None:
    """The layer slider and the overlay opacity with the overlay, patch grid and summary they drive, switched in
    the browser; the values they report back rerun only this part, and the downloads of what is on screen."""
    exp = core.run("explaining the image", fetch)
    if exp is None:
        return
    layer, raw = layer_explorer(image_payload(exp, scale, shared), (exp,), controls={OVERLAY_OPACITY: DEFAULT_OPACITY})
    index, opacity = views.layer_index(layer), float(st.session_state.get(OVERLAY_OPACITY.key, DEFAULT_OPACITY))
    st.subheader("Downloads")
    views.downloads(fetch, exp.kind, {
        "Overlay": lambda e: figures.image_overlay(e, layer=index, raw_attention=raw, opacity=opacity,
                                                   colormap=scale),
        "Patch grid": lambda e: figures.patch_heatmap(e, layer=index, raw_attention=raw, colormap=scale),
    }, key="image", stem=views.download_stem(exp, source),
       view=dict(layer=index, raw_attention=raw, colormap=scale, opacity=opacity))
    sync_url()


def show(exp: Explanation | None) -> None:
    """Everything drawn from the explanation, kept a local: the page's globals outlive the run (its fragment and
    download makers are functions of this script) in a closed tab's session, for server.disconnectedSessionTTL.
    The fragment and the makers re-fetch it through the cache (`fetch`)."""
    if exp is None:
        return
    left, right = st.columns([1, 2])
    with left:
        views.prediction(exp)
        photo_model_offer(exp)
        st.caption(f"Explained: {safe_text(exp.target_description)}. Method: {views.method_words(exp)}, "
                   f"{exp.grid[0]}×{exp.grid[1]} patches.")
        if facts := methods.describe(exp.method, exp.settings):
            st.caption(safe_text(facts) + ".")
        source_size, size = exp.settings.get("source_size"), exp.settings.get("image_size")
        if source_size and size and list(source_size) != list(size):
            how = "Resized and centre-cropped" if exp.settings.get("center_crop") else "Resized"
            st.caption(f"{how} from {source_size[1]}x{source_size[0]} to {size[1]}x{size[0]} (the model's input size).")
    with right:
        if exp.not_meaningful:  # the method's own verdict (its note is beside the prediction): nothing to draw
            st.warning(f"No map drawn: {views.method_words(exp)} is not meaningful on this image (see the note on "
                       "the left); choose another method.")
        else:
            layer_view(fetch, scale)
        trust_line(name, allow_pickle, exp, image_bytes)


loaded = image_bytes is not None and core.run(f"loading {name or 'the model'}", core.load, name, allow_pickle)
show(core.run(f"running {name} on {source} and computing {method.method}", fetch) if loaded else None)
sync_url()
