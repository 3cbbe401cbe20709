"""Shareable uploads: the bounded store, and a link after an upload that restores it or says it cannot."""
from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Callable

import numpy as np
import pytest

from rollout_core.serving.upload_store import UploadStore, digest, is_digest
from test_pages_apptest import assert_clean, chart_count, page, png, texts


def test_digest_is_the_sha256_prefix() -> None:
    assert digest(b"abc") == "ba7816bf8f01cfea"  # SHA-256("abc") from FIPS 180-2, first 16 hex digits
    assert is_digest(digest(b"x")) and not is_digest("chelsea") and not is_digest("BA7816BF8F01CFEA")


def test_store_evicts_the_oldest_past_its_count() -> None:
    store = UploadStore(max_count=2)
    a, b = store.put_image(b"a", "a.png"), store.put_image(b"b")
    store.put_image(b"a")  # put again: now the newest, so b is the oldest
    c = store.put_image(b"c")
    assert store.image(b) is None and store.image(a).name == "" and store.image(c).data == b"c" and len(store) == 2


def test_store_evicts_the_oldest_past_its_bytes_and_refuses_what_cannot_fit() -> None:
    store = UploadStore(max_count=10, max_bytes=10)
    first, second = store.put_image(b"x" * 6), store.put_image(b"y" * 4)
    assert store.size() == 10 and store.image(first) is not None
    third = store.put_image(b"z" * 3)  # 13 bytes: the oldest goes
    assert store.image(first) is None and store.image(second) is not None and store.image(third) is not None
    big = store.put_image(b"w" * 11)
    assert store.image(big) is None and store.size() == 7


def test_the_store_is_typed() -> None:
    """Issue 30: a text link naming an image read the image's bytes as UTF-8 (a traceback on every text page)."""
    store = UploadStore()
    image, text = store.put_image(_image(), "a.png"), store.put_text("a long text \udcff with a lone surrogate")
    assert store.text(image) is None and store.image(text) is None
    assert store.text(text) == "a long text \udcff with a lone surrogate" and store.image(image).name == "a.png"


def test_texts_cannot_evict_images_and_a_visitor_evicts_its_own_first() -> None:
    """Issue 30: 66 links with distinct long texts evicted another visitor's uploaded image (one shared 64-item
    store, no per-visitor share)."""
    store = UploadStore(max_count=3, text_count=3)
    theirs = store.put_image(_image(), "theirs.png", owner="B")
    their_text = store.put_text("B's text", owner="B")
    for i in range(66):
        store.put_text(f"text {i} " * 100, owner="A")
    assert store.image(theirs) is not None  # texts are kept apart from images
    assert store.text(their_text) == "B's text"  # A's texts made room among A's own
    mine = [store.put_image(bytes([i]) * 10, owner="A") for i in range(2)]
    third = store.put_image(b"z" * 10, owner="A")  # full: A's own oldest image goes, not B's
    assert store.image(theirs) is not None and store.image(mine[0]) is None
    assert store.image(mine[1]) is not None and store.image(third) is not None
    store.put_image(b"c" * 10, owner="C")  # C has nothing to give up: the oldest of all goes
    assert store.image(theirs) is None


def _image() -> bytes:
    pixels = np.zeros((32, 32, 3), np.uint8)
    pixels[4:12, 4:20] = (0, 200, 0)
    return png(pixels)


@pytest.mark.parametrize("path", ["app_pages/image.py", "app_pages/compare.py"])
def test_an_upload_is_named_in_the_link_and_a_new_session_gets_it_back(path: str,
                                                                        tiny_model_dir: Callable[[str], Path]) -> None:
    model = str(tiny_model_dir("vit"))
    query = {"model": model, "example": "chelsea"}
    if path.endswith("compare.py"):
        query["modality"] = "image"
    at = page(path, **query)
    content = _image()
    at.file_uploader(key="upload").set_value(("green.png", content, "image/png")).run()
    assert_clean(at)
    assert at.query_params.get("upload") == hashlib.sha256(content).hexdigest()[:16]
    assert "example" not in at.query_params
    shown = chart_count(at)
    assert shown >= 1 and not at.error

    shared = page(path, **{k: v for k, v in at.query_params.items()})  # another browser opens the link
    assert_clean(shared)
    assert not shared.error, texts(shared.error)
    assert any("green.png" in c for c in texts(shared.caption))
    assert chart_count(shared) == shown

    at.file_uploader(key="upload").set_value(None).run()  # removed: back to a bundled example, link says so
    assert_clean(at)
    assert "upload" not in at.query_params and not at.error and chart_count(at) == shown


@pytest.mark.parametrize("name", ["0123456789abcdef", "chelsea<b>"])
def test_a_link_to_an_upload_this_server_lacks_says_so_and_shows_no_other_image(
        name: str, tiny_model_dir: Callable[[str], Path]) -> None:
    at = page("app_pages/image.py", model=str(tiny_model_dir("vit")), upload=name, example="chelsea")
    assert_clean(at)
    assert any("this server does not have" in e for e in texts(at.error))
    assert chart_count(at) == 0 and not at.get("metric")
    at.selectbox(key="example").set_value("coffee").run()  # picking an example drops the link's upload
    assert_clean(at)
    assert "upload" not in at.query_params and not at.error and chart_count(at) == 2


def test_a_text_too_long_for_the_link_is_named_by_its_hash_and_restored(tiny_model_dir: Callable[[str], Path]) -> None:
    model = str(tiny_model_dir("bert"))
    long_text = "a good film. " * 160  # 2080 characters: more than a link carries
    at = page("app_pages/text.py", model=model)
    at.text_area(key="text").set_value(long_text).run()
    assert_clean(at)
    assert "text" not in at.query_params
    assert at.query_params.get("text_id") == hashlib.sha256(long_text.encode("utf-8")).hexdigest()[:16]
    shared = page("app_pages/text.py", **{k: v for k, v in at.query_params.items()})
    assert_clean(shared)
    assert shared.text_area(key="text").value == long_text and not shared.error
    gone = page("app_pages/text.py", model=model, text_id="0123456789abcdef")
    assert_clean(gone)
    assert any("long text" in e and "does not have" in e for e in texts(gone.error))


def test_evaluate_starts_from_the_text_and_the_upload_of_the_page_the_user_came_from(
        tiny_model_dir: Callable[[str], Path]) -> None:
    from streamlit.testing.v1 import AppTest

    from test_pages_apptest import APP, TIMEOUT

    image = page("app_pages/image.py", model=str(tiny_model_dir("vit")))
    content = _image()
    image.file_uploader(key="upload").set_value(("green.png", content, "image/png")).run()
    at = AppTest.from_file(APP, default_timeout=TIMEOUT)
    at.session_state["_last_text"] = "the text typed on the Text page"  # what text_input left in the session
    at.session_state["_upload_mine"] = image.query_params["upload"]  # what image_input left in the session
    at.switch_page("app_pages/evaluate.py").run()
    assert at.text_area(key="text").value == "the text typed on the Text page"
    at.radio(key="modality").set_value("image").run()
    assert_clean(at)
    assert any("green.png" in c for c in texts(at.caption)) and not at.error
