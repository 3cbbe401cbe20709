"""The image picker every page shares: an upload or a bundled example, and the upload's name in the URL.

An upload is kept in a bounded server-side store (`rollout_core.inputs.upload_store`) and named in the URL
by its content hash (`upload=<digest>`, replacing `example=`), so a shared link shows that upload, or says
plainly that this server no longer has it, never another image.
"""
from __future__ import annotations

from dataclasses import dataclass

import streamlit as st

from app_pages._lib import core
from app_pages._lib.safe import safe_text
from app_pages._lib.state import param
from rollout_core.data.example_images import example_images
from rollout_core.inputs.upload_store import UploadStore, is_digest

UPLOAD_TYPES = ["png", "jpg", "jpeg", "webp", "bmp", "gif"]
UPLOAD_PARAM = "upload"
DEFAULT_EXAMPLE = "shapes-triangle"


@dataclass(frozen=True)
class ImageChoice:
    """The chosen image: its bytes (None: nothing to show) and a name for captions and file names."""

    data: bytes | None
    name: str


@st.cache_resource(show_spinner=False)
def upload_store() -> UploadStore:
    """The process-wide store of uploads (shared by every session, bounded)."""
    return UploadStore()


def _forget_link_upload() -> None:
    """Picking an example drops a link's upload name (the example is what the user now wants)."""
    if UPLOAD_PARAM in st.query_params:
        del st.query_params[UPLOAD_PARAM]
    st.session_state["_upload_mine"] = None


def image_input(label: str = "Upload an image (png, jpeg, webp, bmp, gif: first frame)",
                example_label: str = "…or a bundled example") -> ImageChoice:
    """The uploader and the example picker; the upload wins, then an upload named by the link, then the example."""
    examples = core.run("listing the bundled examples", example_images) or {}
    upload = st.file_uploader(label, type=UPLOAD_TYPES, key="upload")
    linked = st.query_params.get(UPLOAD_PARAM)
    if upload is not None:
        data = upload.getvalue()
        key = upload_store().put(data, upload.name)
        st.session_state["_upload_mine"] = key
        st.query_params[UPLOAD_PARAM] = key
        if "example" in st.query_params:
            del st.query_params["example"]
        return ImageChoice(data, upload.name)
    if linked is not None and linked == st.session_state.get("_upload_mine"):
        _forget_link_upload()  # this session's own upload was removed from the uploader: back to the examples
        linked = None
    names = list(examples)
    if linked is not None:
        stored = upload_store().get(linked) if is_digest(linked) else None
        if stored is None:
            st.error(safe_text(f"This link names an uploaded image (upload={linked[:40]}) that this server does "
                               "not have: uploads are kept for a limited time and count, and not across restarts. "
                               "Upload the image again, or pick a bundled example."))
        else:
            st.caption(safe_text(f"Showing the image uploaded as “{stored.name}” (named in the link as "
                                 f"upload={linked})."))
        if names:
            st.selectbox(example_label, names, key="example", index=None, placeholder="Pick an example…",
                         on_change=_forget_link_upload)
        return ImageChoice(None if stored is None else stored.data, stored.name if stored else "upload")
    if not names:
        return ImageChoice(None, "")
    param("example", DEFAULT_EXAMPLE if DEFAULT_EXAMPLE in names else names[0], tuple(names))
    if st.session_state.get("example") is None:
        st.session_state["example"] = DEFAULT_EXAMPLE if DEFAULT_EXAMPLE in names else names[0]
    source = st.selectbox(example_label, names, key="example")
    return ImageChoice(examples[source].read_bytes(), source)
