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
_MINE = "_upload_mine"


@dataclass(frozen=True)
class ImageChoice:
    """The chosen image: its bytes (None: nothing to show) and a name for captions and file names."""

    data: bytes | None
    name: str


@st.cache_resource(show_spinner=False)
def upload_store() -> UploadStore:
    """The process-wide store of uploads (shared by every session, bounded)."""
    return UploadStore()


def _forget_upload() -> None:
    """The upload was removed, or an example picked: drop the upload's name from the URL and the session."""
    if UPLOAD_PARAM in st.query_params:
        del st.query_params[UPLOAD_PARAM]
    st.session_state[_MINE] = None


def _on_upload_change() -> None:
    if st.session_state.get("upload") is None:
        _forget_upload()


def image_input(label: str = "Upload an image (png, jpeg, webp, bmp, gif: first frame)",
                example_label: str = "…or a bundled example") -> ImageChoice:
    """The uploader and the example picker. The upload wins; then the upload named by the link, or the one this
    session made on another page (so Evaluate and Compare run on the Image page's upload); then the example."""
    examples = core.run("listing the bundled examples", example_images) or {}
    upload = st.file_uploader(label, type=UPLOAD_TYPES, key="upload", on_change=_on_upload_change)
    if upload is not None:
        data = upload.getvalue()
        key = upload_store().put(data, upload.name)
        st.session_state[_MINE] = st.query_params[UPLOAD_PARAM] = key
        if "example" in st.query_params:
            del st.query_params["example"]
        return ImageChoice(data, upload.name)
    names = list(examples)
    named = st.query_params.get(UPLOAD_PARAM) or st.session_state.get(_MINE)
    if named is not None:
        return _stored_upload(named, names, example_label)
    if not names:
        return ImageChoice(None, "")
    default = DEFAULT_EXAMPLE if DEFAULT_EXAMPLE in names else names[0]
    param("example", default, tuple(names))
    if st.session_state.get("example") is None:
        st.session_state["example"] = default
    source = st.selectbox(example_label, names, key="example")
    return ImageChoice(examples[source].read_bytes(), source)


def _stored_upload(named: str, names: list[str], example_label: str) -> ImageChoice:
    """The stored upload `named` (with a caption saying which), or an error saying this server lacks it."""
    stored = upload_store().get(named) if is_digest(named) else None
    if stored is None:
        st.error(safe_text(f"This link names an uploaded image (upload={named[:40]}) that this server does not "
                           "have: uploads are kept for a limited time and count, and not across restarts. Upload "
                           "the image again, or pick a bundled example."))
    else:
        st.query_params[UPLOAD_PARAM] = named
        if "example" in st.query_params:
            del st.query_params["example"]
        st.caption(safe_text(f"Showing the uploaded image “{stored.name}” (upload={named} in the link)."))
    if names:
        st.selectbox(example_label, names, key="example", index=None, placeholder="Pick an example…",
                     on_change=_forget_upload)
    return ImageChoice(None, "upload") if stored is None else ImageChoice(stored.data, stored.name)
