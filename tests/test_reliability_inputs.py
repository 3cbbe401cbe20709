"""Issue 7: every bad or unusual text and image input through the three paths a user can take.

One table of text cases and one of image cases, each run through
- the core (`explain_text` / `explain_image` on tiny models): the right `RolloutError` subclass and message,
  or a valid explanation whose content is checked against the input (offsets cut the text into the tokens;
  sampled pixels of the image the model saw have the colours drawn into the file);
- the CLI (`python -m rollout_core text|image --json`, every case its own process, see tests/cli_driver.py):
  exit 2 with one `error: ...` line and no traceback, or exit 0 with JSON;
- the page (Streamlit AppTest on app_pages/text.py and app_pages/image.py, one session walking the whole table):
  an `st.error` with the message, and after every refused input a good input works in the same session.
"""
from __future__ import annotations

import io
import json
import unicodedata
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any, Callable

import numpy as np
import pytest
import streamlit as st
from PIL import Image
from streamlit.testing.v1 import AppTest

from cli_driver import assert_one_error_line, cli_env, run_cli_cases
from rollout_core.errors import InputError, RolloutError, SecurityError
from rollout_core.explain import explain_image, explain_text
from test_image_inputs import _bomb_png  # a real PNG header declaring a huge size over 8x8 pixels
from page_views import chart_count, shown_html
from tiny_models import MAX_LENGTH

APP = str(Path(__file__).resolve().parents[1] / "app.py")
RED, BLUE, WHITE, CYAN = (255, 0, 0), (0, 0, 255), (255, 255, 255), (0, 255, 255)
CLI_PIXEL_LIMIT = 30_000_000  # ROLLOUT_MAX_IMAGE_PIXELS for the CLI processes (the default is 40,000,000)


# ----------------------------------------------------------------------------------------------
# The text table


@dataclass(frozen=True)
class TextCase:
    id: str
    text: str
    error: str | None = None  # a fragment of the InputError message; None = explained
    truncated: bool = False
    on_page: bool = True  # a browser sends UTF-8: lone surrogates only come from argv or Python callers


LONG_PASTE = ("The cat sat on the mat. It was not a bad film, but the plot was boring! " * 1400)[:100_000]
MARKUP = "<script>x</script> <b>fun</b> &amp; [SEP] </s> <img src=x>"  # within the tiny model's 64 tokens

TEXT_CASES = [
    TextCase("empty", "", error="empty"),
    TextCase("whitespace-only", "  \n\t \r\n  ", error="empty"),
    TextCase("invisible-only", "\u200b\u200d\ufeff", error="no characters"),  # zero-width chars: no token
    TextCase("lone-surrogate", "caf\udcff", error="not valid Unicode", on_page=False),  # undecodable argv byte
    TextCase("special-characters-only", "!!! ??? ... #$%^&*()_+ ~~~ ///"),
    TextCase("emoji-and-mixed-scripts", "🙂👍🏽 日本語のテキスト and English, русский, العربية, עברית, cafe\u0301"),
    TextCase("100k-character-paste", LONG_PASTE, truncated=True),
    TextCase("markup", MARKUP),
]


def _check_text_explanation(case: TextCase, e: Any, limit: int) -> None:
    """The explanation belongs to this text: offsets cut the (normalised) text into the shown tokens."""
    normal = unicodedata.normalize("NFC", case.text.replace("\r\n", "\n"))
    if case.truncated:
        t = e.truncation
        assert t is not None and t["total_chars"] == len(normal) and t["kept_tokens"] == limit == len(e.tokens)
        assert normal.startswith(e.text) and len(e.text) == t["kept_chars"] < len(normal)
    else:
        assert e.truncation is None and e.text == normal
    assert int(e.special.sum()) == 2  # the model's own [CLS] and [SEP]; typed "[SEP]" is plain text
    for token, (a, b), special in zip(e.tokens, e.offsets, e.special):
        if not special:
            assert e.text[a:b] == token
    assert np.isfinite(e.scores).all() and abs(float(e.display_scores().sum()) - 1) < 1e-6


@pytest.mark.parametrize("case", TEXT_CASES, ids=[c.id for c in TEXT_CASES])
def test_text_case_core(case: TextCase, tiny_handle: Callable[[str], Any]) -> None:
    handle = tiny_handle("bert")
    if case.error:
        with pytest.raises(InputError, match=case.error):
            explain_text(handle, case.text)
        return
    _check_text_explanation(case, explain_text(handle, case.text, method="gradient"), MAX_LENGTH)


# ----------------------------------------------------------------------------------------------
# The image table


def _png(image: Image.Image) -> bytes:
    out = io.BytesIO()
    image.save(out, "PNG")
    return out.getvalue()


def _save(image: Image.Image, fmt: str, **options: Any) -> bytes:
    out = io.BytesIO()
    image.save(out, fmt, **options)
    return out.getvalue()


def _halves(mode: str, left: Any, right: Any, size: tuple[int, int] = (64, 32)) -> Image.Image:
    """`size` (w, h) image: left half one colour, right half another."""
    image = Image.new(mode, size, right)
    image.paste(left, (0, 0, size[0] // 2, size[1]))
    return image


def _noise(fmt: str) -> bytes:
    rng = np.random.default_rng(0)
    return _save(Image.fromarray(rng.integers(0, 256, (64, 64, 3), dtype=np.uint8)), fmt)


def _corrupt_png() -> bytes:
    data = bytearray(_noise("PNG"))
    start = data.index(b"IDAT") + 4
    data[start + 10 : start + 60] = bytes(50)  # compressed pixels overwritten: zlib / CRC failure
    return bytes(data)


def _sixteen_bit() -> bytes:
    pixels = np.full((32, 64), 32896, np.uint16)  # 32896 / 257 = 128: mid grey (PIL's convert clips to white)
    pixels[:, :32] = 65535
    image = Image.fromarray(pixels)
    assert image.mode.startswith("I;16")
    return _png(image)


def _palette_gif() -> bytes:
    image = Image.new("P", (64, 32), 2)
    image.putpalette([0, 0, 0, 200, 40, 40, 40, 40, 200] + [0] * (253 * 3))
    image.paste(1, (0, 0, 32, 32))
    return _save(image, "GIF")


def _exif_rotated() -> bytes:
    """Stored 64x32 with the left half red; EXIF orientation 6 = rotate 90 degrees clockwise to display,
    so upright the top half is red and the bottom half blue."""
    exif = Image.Exif()
    exif[0x0112] = 6
    return _save(_halves("RGB", RED, BLUE), "JPEG", exif=exif.tobytes(), quality=95)


@dataclass(frozen=True)
class ImageCase:
    id: str
    filename: str
    make: Callable[[], bytes]
    error: type[RolloutError] | None = None
    message: str = ""  # a fragment of the error message
    # good cases: (row, col) of the 32x32 image the model saw -> expected RGB (the file's drawn colours)
    samples: tuple[tuple[tuple[int, int], tuple[int, int, int]], ...] = ()
    tolerance: int = 6


LEFT, RIGHT = (16, 8), (16, 24)
IMAGE_CASES = [
    ImageCase("not-an-image", "notes.png", lambda: b"this is plain text, not a picture\n" * 20, InputError,
              "not an image"),
    ImageCase("truncated-png", "cut.png", lambda: _noise("PNG")[:600], InputError, "truncated or corrupt"),
    ImageCase("truncated-jpeg", "cut.jpg", lambda: _noise("JPEG")[:900], InputError, "truncated or corrupt"),
    ImageCase("corrupt-png", "corrupt.png", _corrupt_png, InputError, "corrupt"),
    ImageCase("zero-byte", "empty.png", lambda: b"", InputError, "empty"),
    ImageCase("bomb-above-limit", "bomb.png", lambda: _bomb_png(8000, 6000), SecurityError,
              "48,000,000 pixels is above the limit"),
    ImageCase("bomb-10-gigapixel", "bomb10g.png", lambda: _bomb_png(100_000, 100_000), SecurityError,
              "decompression bomb"),
    ImageCase("extreme-aspect-strip", "strip.png", lambda: _png(Image.new("RGB", (4096, 1), RED)), SecurityError,
              "more than 100 times its short side"),  # short side resized up to 256: 1,048,576x256 pixels
    ImageCase("one-pixel", "dot.png", lambda: _png(Image.new("RGB", (1, 1), (10, 200, 30))),
              samples=((LEFT, (10, 200, 30)), (RIGHT, (10, 200, 30)))),
    ImageCase("grayscale", "gray.png", lambda: _png(_halves("L", 30, 200)),
              samples=((LEFT, (30, 30, 30)), (RIGHT, (200, 200, 200)))),
    ImageCase("rgba", "rgba.png", lambda: _png(_halves("RGBA", (255, 0, 0, 255), (0, 0, 255, 0))),
              samples=((LEFT, RED), (RIGHT, WHITE))),  # transparent = white, not the hidden blue
    ImageCase("cmyk-jpeg", "cmyk.jpg", lambda: _save(_halves("CMYK", (255, 0, 0, 0), (0, 0, 0, 0)), "JPEG",
                                                     quality=95),
              samples=((LEFT, CYAN), (RIGHT, WHITE)), tolerance=16),
    ImageCase("16-bit-png", "deep.png", _sixteen_bit, samples=((LEFT, WHITE), (RIGHT, (128, 128, 128)))),
    ImageCase("palette-gif", "palette.gif", _palette_gif, samples=((LEFT, (200, 40, 40)), (RIGHT, (40, 40, 200)))),
    ImageCase("exif-rotated-jpeg", "phone.jpg", _exif_rotated,  # upright: top-right red, bottom-left blue
              samples=(((8, 24), RED), ((24, 8), BLUE)), tolerance=16),
    ImageCase("very-large-legal-photo", "big.jpg",  # 24 megapixels: legal, downscaled
              lambda: _save(_halves("RGB", RED, BLUE, (6000, 4000)), "JPEG", quality=90),
              samples=((LEFT, RED), (RIGHT, BLUE)), tolerance=16),
]


@lru_cache(maxsize=None)
def image_bytes(case_id: str) -> bytes:
    return next(c for c in IMAGE_CASES if c.id == case_id).make()


def _check_seen_image(case: ImageCase, image: np.ndarray) -> None:
    assert image.shape == (32, 32, 3) and image.dtype == np.uint8
    for (row, col), colour in case.samples:
        got = tuple(int(v) for v in image[row, col])
        assert all(abs(g - c) <= case.tolerance for g, c in zip(got, colour)), (case.id, (row, col), got, colour)


@pytest.mark.parametrize("case", IMAGE_CASES, ids=[c.id for c in IMAGE_CASES])
def test_image_case_core(case: ImageCase, tiny_handle: Callable[[str], Any]) -> None:
    handle = tiny_handle("vit")
    if case.error:
        with pytest.raises(case.error, match=case.message):
            explain_image(handle, image_bytes(case.id))
        return
    e = explain_image(handle, image_bytes(case.id))
    assert np.isfinite(e.scores).all() and abs(float(e.score_map().sum()) - 1) < 1e-6
    _check_seen_image(case, e.image)


# ----------------------------------------------------------------------------------------------
# CLI: every case its own `python -m rollout_core` process


@pytest.mark.slow
def test_every_case_through_the_cli(tiny_model_dir: Callable[[str], Path], tmp_path: Path) -> None:
    bert, vit = tiny_model_dir("bert"), tiny_model_dir("vit")
    runs: list[tuple[list[str], str | bytes | None]] = []
    for case in TEXT_CASES:  # the text through stdin (a 100,000-character paste does not fit every argv),
        if case.on_page:  # except what only an argument can carry
            runs.append((["text", "--model", str(bert), "--text", "-", "--json"], case.text))
        else:
            runs.append((["text", "--model", str(bert), "--text", case.text, "--json"], None))
    images = tmp_path / "images"
    images.mkdir()
    env_bomb = ImageCase("bomb-above-configured-limit", "bomb36m.png", lambda: _bomb_png(6000, 6000),
                         SecurityError, f"36,000,000 pixels is above the limit of {CLI_PIXEL_LIMIT:,}")
    image_cases = [*IMAGE_CASES, env_bomb]
    for case in image_cases:
        path = images / case.filename
        path.write_bytes(case.make() if case is env_bomb else image_bytes(case.id))
        runs.append((["image", "--model", str(vit), "--image", str(path), "--json"], None))
    runs.append((["image", "--model", str(vit), "--image", str(images / "missing.png")], None))
    runs.append((["text", "--model", str(bert), "--text", "-"], "café".encode("latin-1")))  # not UTF-8
    results = run_cli_cases(runs, tmp_path / "cli", warm=[bert, vit],
                            env=cli_env(ROLLOUT_MAX_IMAGE_PIXELS=str(CLI_PIXEL_LIMIT)))

    failures = []
    for case, result in zip([*TEXT_CASES, *image_cases], results):
        try:
            refusal = case.error if isinstance(case, TextCase) else case.message if case.error else None
            if refusal:
                assert_one_error_line(result, refusal)
                continue
            assert result.status == 0 and "Traceback" not in result.stderr, result.stderr[-2000:]
            data = json.loads(result.stdout)
            if isinstance(case, TextCase):
                assert ("truncation" in data) == case.truncated
                assert data["text"] == (unicodedata.normalize("NFC", case.text) if not case.truncated
                                        else LONG_PASTE[: data["truncation"]["kept_chars"]])
            else:
                assert data["grid"] == [4, 4] and abs(float(np.sum(data["score_map"])) - 1) < 1e-6
        except AssertionError as err:
            failures.append(f"{case.id}: {err}")
    assert not failures, "\n".join(failures)
    assert_one_error_line(results[-2], "no such image file")
    assert_one_error_line(results[-1], "not valid UTF-8")


# ----------------------------------------------------------------------------------------------
# Pages: one session walks the table; after each refused input a good one works again


@pytest.fixture
def fresh_page_caches() -> None:
    st.cache_resource.clear()


def _page(path: str, **query: str) -> AppTest:
    at = AppTest.from_file(APP, default_timeout=120)
    for key, value in query.items():
        at.query_params[key] = value
    return at.switch_page(path).run()


_html = shown_html


def test_every_text_case_on_the_text_page(tiny_model_dir: Callable[[str], Path], fresh_page_caches: None) -> None:
    at = _page("app_pages/text.py", model=str(tiny_model_dir("bert")), text="the cat sat")
    failures = []
    for case in [c for c in TEXT_CASES if c.on_page]:
        at.text_area(key="text").set_value(case.text).run()
        try:
            assert not at.exception, [e.value for e in at.exception]
            if case.error:
                assert len(at.error) == 1 and case.error in at.error[0].value, [e.value for e in at.error]
                at.text_area(key="text").set_value("a good film").run()  # the same session recovers
                assert not at.exception and not at.error and "token-highlight" in _html(at)
                continue
            assert not at.error, [e.value for e in at.error]
            body = _html(at)
            assert "token-highlight" in body
            assert "<script" not in body and "<img" not in body and "<b>" not in body  # markup is text
            warned = any("longer than the model's limit" in w.value for w in at.warning)
            assert warned == case.truncated
            if case.id == "markup":
                assert "&lt;script" in body or "&lt;" in body
        except AssertionError as err:
            failures.append(f"{case.id}: {err}")
    assert not failures, "\n".join(failures)


@pytest.mark.slow
def test_every_image_case_on_the_image_page(tiny_model_dir: Callable[[str], Path], fresh_page_caches: None) -> None:
    at = _page("app_pages/image.py", model=str(tiny_model_dir("vit")))
    good = ("good.png", _png(_halves("RGB", RED, BLUE)), "image/png")
    failures = []
    for case in IMAGE_CASES:
        mime = "image/gif" if case.filename.endswith(".gif") else \
            "image/jpeg" if case.filename.endswith(".jpg") else "image/png"
        at.file_uploader(key="upload").set_value((case.filename, image_bytes(case.id), mime)).run()
        try:
            assert not at.exception, [e.value for e in at.exception]
            if case.error:
                assert len(at.error) == 1 and case.message in at.error[0].value, [e.value for e in at.error]
                assert not chart_count(at)  # no stale result from the previous image
                at.file_uploader(key="upload").set_value(good).run()  # the same session recovers
                assert not at.exception and not at.error and chart_count(at) == 2
                continue
            assert not at.error, [e.value for e in at.error]
            assert chart_count(at) == 2  # overlay and patch grid
        except AssertionError as err:
            failures.append(f"{case.id}: {err}")
    assert not failures, "\n".join(failures)
