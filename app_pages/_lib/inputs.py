"""The inputs every page shares: the image picker (an upload or a bundled example) and the text area, with
their names in the URL.

An upload is kept in a bounded server-side store (`rollout_core.serving.upload_store`) and named in the URL
by its content hash (`upload=<digest>`, replacing `example=`), so a shared link shows that upload, or says
plainly that this server no longer has it, never another image. A text too long for a URL goes the same way
(`text_id=<digest>`). The store is typed: a link naming an input of the other kind, or an image whose bytes do
not decode, gets the same "this server does not have it" note. Each input is stored for its visitor, whose own
oldest inputs make room first.
"""
from __future__ import annotations

from dataclasses import dataclass

import streamlit as st

from app_pages._lib import core
from app_pages._lib.safe import safe_text
from app_pages._lib.state import MAX_URL_TEXT, param
from app_pages._lib.visitor import visitor
from rollout_core.data.example_images import example_images
from rollout_core.data.sentiment import EXAMPLE_SENTENCES
from rollout_core.errors import RolloutError
from rollout_core.inputs.images import load_image
from rollout_core.serving.upload_store import UploadStore, is_digest

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
        key = upload_store().put_image(data, upload.name, visitor())
        st.session_state[_MINE] = st.query_params[UPLOAD_PARAM] = key
        if "example" in st.query_params:
            del st.query_params["example"]
        return ImageChoice(data, upload.name)
    names = list(examples)
    named = st.query_params.get(UPLOAD_PARAM)
    if named is None and "example" not in st.query_params:  # a link naming an example wins over the session's
        named = st.session_state.get(_MINE)
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
    """The stored upload `named` (with a caption saying which), or an error saying this server lacks it (also for
    a name that is not an image's, or an image whose bytes do not decode)."""
    stored = upload_store().image(named) if is_digest(named) else None
    if stored is not None and not _decodes(stored.data):
        stored = None
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


def _decodes(data: bytes) -> bool:
    try:
        load_image(data)
    except RolloutError:
        return False
    return True


TEXT_PARAM = "text_id"
_LAST_TEXT = "_last_text"


def text_input(label: str = "Text", height: int = 80) -> str:
    """The URL-backed text area, starting from the text of the last page that had one (so Evaluate and Compare
    run on the Text page's input). A text too long for the URL is kept in the upload store and named in the
    link as `text_id=<digest>`; a link whose long text this server lacks says so (the default text is shown)."""
    named = st.query_params.get(TEXT_PARAM)
    if "text" not in st.session_state and named is not None:
        stored = upload_store().text(named) if is_digest(named) else None
        if stored is None:
            st.error(safe_text(f"This link names a long text (text_id={named[:40]}) that this server does not "
                               "have: texts too long for a link are kept for a limited time and count, and not "
                               "across restarts. The default text is shown instead; paste the text again."))
            del st.query_params[TEXT_PARAM]
        else:
            st.session_state["text"] = stored
    if "text" not in st.session_state and "text" not in st.query_params and _LAST_TEXT in st.session_state:
        st.session_state["text"] = st.session_state[_LAST_TEXT]  # the text of the page the user came from
    param("text", EXAMPLE_SENTENCES[0])
    text = st.text_area(label, key="text", height=height, max_chars=200_000)
    st.session_state[_LAST_TEXT] = text
    if len(text) > MAX_URL_TEXT:
        st.query_params[TEXT_PARAM] = upload_store().put_text(text, visitor())
    elif TEXT_PARAM in st.query_params:
        del st.query_params[TEXT_PARAM]
    return text
