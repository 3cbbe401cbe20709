"""Issue 30, links from strangers: every page, with every URL parameter it reads set to text that is not valid
UTF-8 or to a huge value, and the pages that look stored inputs up with every parameter set to a stored input's name
(of either kind), shows notes, never a traceback. The parameters are the ones the pages really read (recorded as they
register them), in each of their views."""
from __future__ import annotations

import io
from pathlib import Path
from typing import Any, Callable

import numpy as np
import pytest
import streamlit as st
from PIL import Image
from streamlit.testing.v1 import AppTest

from app_pages._lib import inputs, state

APP = str(Path(__file__).resolve().parents[1] / "app.py")
LINK_KEYS = (inputs.UPLOAD_PARAM, inputs.TEXT_PARAM, "example")
"""Read from the URL directly, not through `state.param`."""
MODEL_KEYS = ("model", "model_b")


def _png() -> bytes:
    out = io.BytesIO()
    Image.fromarray(np.full((24, 24, 3), 200, np.uint8)).save(out, format="PNG")
    return out.getvalue()


class _Stored:
    """A fresh upload store holding one image and one long text, as a visitor left them."""

    def __init__(self) -> None:
        st.cache_resource.clear()
        store = inputs.upload_store()
        self.image = store.put_image(_png(), "grey.png", owner="someone")
        self.text = store.put_text("a long text " * 400, owner="someone")
        self.not_an_image = store.put_image(b"these bytes are not an image", "fake.png", owner="someone")


def _run(path: str, query: dict[str, str]) -> AppTest:
    at = AppTest.from_file(APP, default_timeout=120)
    for key, value in query.items():
        at.query_params[key] = value
    return at.switch_page(path).run()


def _assert_no_traceback(at: AppTest, where: Any) -> None:
    assert not at.exception, (where, [str(e.value)[:300] for e in at.exception])
    unexpected = [str(e.value) for e in at.error if "Unexpected error" in str(e.value)]
    assert not unexpected, (where, unexpected)
    assert not [c for c in at.code if "Traceback" in str(c.value)], where


@pytest.fixture(scope="module")
def views(tiny_model_dir: Callable[[str], Path]) -> list[tuple[str, dict[str, str], tuple[str, ...]]]:
    """Each page in each of its views: (page, base query, the URL keys it reads there)."""
    bert, vit = str(tiny_model_dir("bert")), str(tiny_model_dir("vit"))
    bases = [("app_pages/text.py", {"model": bert}), ("app_pages/image.py", {"model": vit}),
             ("app_pages/compare.py", {"model": bert}),
             ("app_pages/compare.py", {"model": bert, "mode": "models", "model_b": bert}),
             ("app_pages/compare.py", {"modality": "image", "model": vit}),
             ("app_pages/evaluate.py", {"model": bert}), ("app_pages/evaluate.py", {"modality": "image", "model": vit}),
             *[("app_pages/corpus.py", {"model": bert, "source": source}) for source in
               ("Generated sentences", "Uploaded CSV", "Result folder", "Compare two result folders")]]
    seen: set[str] = set()

    class Recording(dict):
        def __setitem__(self, key: str, value: Any) -> None:
            seen.add(key)
            super().__setitem__(key, value)

    found = []
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(state, "_registered", lambda: st.session_state.setdefault("_url_params", Recording()))
        for path, base in bases:
            seen.clear()
            st.cache_resource.clear()
            _assert_no_traceback(_run(path, base), (path, base))
            found.append((path, base, tuple(sorted(seen | set(LINK_KEYS)))))
    assert all(len(keys) > len(LINK_KEYS) for _, _, keys in found)  # the recording saw the pages' settings
    return found


STORED = {
    "an image's name": lambda stored: stored.image,
    "a text's name": lambda stored: stored.text,
    "an undecodable image's name": lambda stored: stored.not_an_image,
}
"""Names that mean something only to the keys that look a stored input up (LINK_KEYS); to every other key, and to
the model names, they are strings like any other, which GENERIC covers on every page."""
LOOKUP_PAGES = ("app_pages/text.py", "app_pages/image.py")
"""One page per kind of stored input: the other pages read the link keys through the same functions (inputs.py),
as the tests below show for a text link naming an image on Compare and Evaluate."""
GENERIC = {
    # `caf%E9%20%FF%FE`: Streamlit parses the query string with urllib's parse_qs, which decodes bytes that are not
    # UTF-8 as U+FFFD (errors="replace"); that is what a page gets
    "not UTF-8": lambda stored: "caf\ufffd \ufffd\ufffd",
    "huge": lambda stored: "9" * 20_000 + "x" * 180_000,
}
HOSTILE = {**STORED, **GENERIC}


@pytest.mark.slow
@pytest.mark.parametrize("value", list(HOSTILE))
def test_every_page_with_every_parameter_set_to_a_hostile_value(value: str, views) -> None:
    """Generic values on every page in each of its views, every key and the model names; stored names on the
    pages that look them up, every key."""
    for path, base, keys in views:
        if value in STORED and path not in LOOKUP_PAGES:
            continue
        stored = _Stored()
        hostile = HOSTILE[value](stored)
        query = {**base, **{key: hostile for key in keys if key not in MODEL_KEYS}}
        _assert_no_traceback(_run(path, query), (path, base, value))
    for path in sorted({path for path, _, _ in views}) if value in GENERIC else ():  # the model names too
        stored = _Stored()
        _assert_no_traceback(_run(path, dict.fromkeys(MODEL_KEYS, HOSTILE[value](stored))), (path, "model", value))


@pytest.mark.parametrize("path", ["app_pages/text.py", "app_pages/compare.py", "app_pages/evaluate.py"])
def test_a_text_link_naming_an_image_says_the_server_does_not_have_it(path: str, tiny_model_dir) -> None:
    """The reproduction: upload an image, open /text?text_id=<its name>: UnicodeDecodeError with a traceback
    showing server paths, and the session stayed broken."""
    stored = _Stored()
    at = _run(path, {"model": str(tiny_model_dir("bert")), inputs.TEXT_PARAM: stored.image})
    _assert_no_traceback(at, path)
    assert any("names a long text" in str(e.value) and "does not have" in str(e.value) for e in at.error)
    at.run()  # the session goes on
    _assert_no_traceback(at, path)


@pytest.mark.parametrize("name", ["text", "not_an_image"])
def test_an_image_link_naming_a_text_or_undecodable_bytes_says_the_server_does_not_have_it(
        name: str, tiny_model_dir) -> None:
    stored = _Stored()
    at = _run("app_pages/image.py", {"model": str(tiny_model_dir("vit")), inputs.UPLOAD_PARAM: getattr(stored, name)})
    _assert_no_traceback(at, name)
    assert any("names an uploaded image" in str(e.value) and "does not have" in str(e.value) for e in at.error)
