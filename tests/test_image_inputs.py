"""load_image on every kind of good and bad image input, each generated in a temporary folder."""
from __future__ import annotations

import io
import struct
import zlib
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from rollout_core.errors import InputError, SecurityError
from rollout_core.inputs.images import load_image

RED, BLUE, WHITE = (255, 0, 0), (0, 0, 255), (255, 255, 255)


def _png_bytes(image: Image.Image) -> bytes:
    buffer = io.BytesIO()
    image.save(buffer, "PNG")
    return buffer.getvalue()


def _close(pixel, expected, tol=12) -> bool:
    return all(abs(int(a) - int(b)) <= tol for a, b in zip(pixel, expected))


def _png_chunk(kind: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))


# --- refused inputs -------------------------------------------------------------------------------------------


def test_not_an_image_is_an_input_error(tmp_path: Path):
    path = tmp_path / "notes.png"
    path.write_text("this is plain text, not a picture\n" * 20)
    with pytest.raises(InputError, match="not an image"):
        load_image(path)


def test_zero_bytes_file_and_bytes_are_input_errors(tmp_path: Path):
    path = tmp_path / "empty.jpg"
    path.write_bytes(b"")
    with pytest.raises(InputError, match="empty"):
        load_image(path)
    with pytest.raises(InputError, match="empty"):
        load_image(b"")


def test_missing_file_is_an_input_error(tmp_path: Path):
    with pytest.raises(InputError, match="no image file"):
        load_image(tmp_path / "nowhere.png")


@pytest.mark.parametrize("fmt", ["PNG", "JPEG"])
def test_truncated_file_is_an_input_error(tmp_path: Path, fmt: str):
    rng = np.random.default_rng(0)
    buffer = io.BytesIO()
    Image.fromarray(rng.integers(0, 256, (64, 64, 3), dtype=np.uint8)).save(buffer, fmt)
    data = buffer.getvalue()
    path = tmp_path / f"cut.{fmt.lower()}"
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(InputError, match="truncated or corrupt"):
        load_image(path)


def test_corrupt_png_data_is_an_input_error():
    rng = np.random.default_rng(1)
    data = bytearray(_png_bytes(Image.fromarray(rng.integers(0, 256, (32, 32, 3), dtype=np.uint8))))
    start = data.index(b"IDAT") + 4
    data[start + 10 : start + 60] = bytes(50)  # overwrite compressed pixels; the CRC no longer matches
    with pytest.raises(InputError):
        load_image(bytes(data))


def _bomb_png(width: int, height: int) -> bytes:
    """A real 8x8 PNG whose IHDR (with a valid CRC) declares width x height: tiny file, huge image."""
    data = bytearray(_png_bytes(Image.new("RGB", (8, 8), RED)))
    ihdr = data.index(b"IHDR")
    data[ihdr + 4 : ihdr + 12] = struct.pack(">II", width, height)
    data[ihdr + 17 : ihdr + 21] = struct.pack(">I", zlib.crc32(bytes(data[ihdr : ihdr + 17])))
    return bytes(data)


@pytest.mark.parametrize("width,height", [(8000, 6000), (100_000, 100_000)])
def test_decompression_bomb_is_refused_from_the_header(tmp_path: Path, width: int, height: int):
    # The pixel data behind the header is only 8x8: had the loader started decoding, it would have failed
    # with a truncated-data InputError instead of the SecurityError raised from the declared size.
    path = tmp_path / "bomb.png"
    path.write_bytes(_bomb_png(width, height))
    assert path.stat().st_size < 200
    with pytest.raises(SecurityError, match="pixels"):
        load_image(path)


def test_pixel_limit_is_configurable():
    data = _png_bytes(Image.new("RGB", (100, 100), RED))
    with pytest.raises(SecurityError, match="10,000 pixels"):
        load_image(data, max_pixels=5_000)
    assert load_image(data, max_pixels=10_000).size == (100, 100)
    with pytest.raises(SecurityError):
        load_image(np.zeros((100, 100, 3), np.uint8), max_pixels=5_000)


def test_bad_array_shape_and_source_type_are_input_errors():
    with pytest.raises(InputError, match="shape"):
        load_image(np.zeros((4, 4, 2), np.uint8))
    with pytest.raises(InputError, match="cannot read"):
        load_image(12345)  # type: ignore[arg-type]


# --- accepted inputs ------------------------------------------------------------------------------------------


def test_one_pixel_image(tmp_path: Path):
    path = tmp_path / "dot.png"
    Image.new("RGB", (1, 1), (10, 200, 30)).save(path)
    image = load_image(str(path))
    assert image.mode == "RGB" and image.size == (1, 1)
    assert image.getpixel((0, 0)) == (10, 200, 30)


def test_grayscale_becomes_equal_channels():
    gray = Image.fromarray(np.array([[0, 77], [180, 255]], dtype=np.uint8), "L")
    image = load_image(_png_bytes(gray))
    assert image.mode == "RGB"
    assert np.array_equal(np.asarray(image), np.repeat(np.array([[0, 77], [180, 255]], np.uint8)[..., None], 3, 2))


def test_rgba_and_la_are_composited_on_white():
    rgba = np.zeros((2, 2, 4), np.uint8)
    rgba[0, 0] = (255, 0, 0, 255)  # opaque red
    rgba[0, 1] = (255, 0, 0, 0)  # fully transparent: white
    rgba[1, 0] = (0, 0, 0, 128)  # half-transparent black over white: mid grey
    rgba[1, 1] = (0, 0, 255, 255)
    image = np.asarray(load_image(_png_bytes(Image.fromarray(rgba, "RGBA"))))
    assert tuple(image[0, 0]) == RED and tuple(image[0, 1]) == WHITE and tuple(image[1, 1]) == BLUE
    assert _close(image[1, 0], (127, 127, 127), tol=1)
    la = Image.fromarray(np.array([[[50, 255], [50, 0]]], np.uint8), "LA")
    out = np.asarray(load_image(_png_bytes(la)))
    assert tuple(out[0, 0]) == (50, 50, 50) and tuple(out[0, 1]) == WHITE


def test_cmyk_jpeg(tmp_path: Path):
    path = tmp_path / "cmyk.jpg"
    cmyk = Image.new("CMYK", (32, 16), (0, 0, 0, 0))  # no ink: white
    cmyk.paste((255, 0, 0, 0), (0, 0, 16, 16))  # full cyan: (0, 255, 255)
    cmyk.save(path, "JPEG", quality=95)
    assert Image.open(path).mode == "CMYK"
    image = load_image(path)
    assert image.mode == "RGB"
    assert _close(image.getpixel((4, 8)), (0, 255, 255)) and _close(image.getpixel((28, 8)), WHITE)


def test_16bit_grayscale_png_is_scaled_not_clipped(tmp_path: Path):
    values = np.array([[0, 16384, 32768], [49152, 65535, 1000]], dtype=np.uint16)
    path = tmp_path / "deep.png"
    Image.fromarray(values).save(path)
    assert Image.open(path).mode.startswith("I;16")
    out = np.asarray(load_image(path))[..., 0].astype(int)
    expected = np.round(values / 65535 * 255).astype(int)
    assert np.abs(out - expected).max() <= 1  # mid grey stays mid grey (~128), not white


def test_16bit_rgb_png_written_by_hand():
    # 48-bit colour PNG: PIL cannot write one, so build it from chunks; pixel 0 mid grey, pixel 1 (1.0, 0.25, 0).
    raw = b"\x00" + struct.pack(">6H", 32768, 32768, 32768, 65535, 16384, 0)
    data = (b"\x89PNG\r\n\x1a\n" + _png_chunk(b"IHDR", struct.pack(">IIBBBBB", 2, 1, 16, 2, 0, 0, 0))
            + _png_chunk(b"IDAT", zlib.compress(raw)) + _png_chunk(b"IEND", b""))
    out = np.asarray(load_image(data))
    assert _close(out[0, 0], (128, 128, 128), tol=1) and _close(out[0, 1], (255, 64, 0), tol=1)


def test_float_images_are_scaled():
    unit = Image.fromarray(np.array([[0.0, 0.5, 1.0]], np.float32), "F")
    assert np.asarray(load_image(unit))[0, :, 0].tolist() == [0, 128, 255]
    wide = Image.fromarray(np.array([[-10.0, 0.0, 10.0]], np.float32), "F")  # stretched min..max
    assert np.asarray(load_image(wide))[0, :, 0].tolist() == [0, 128, 255]


def test_palette_gif_with_transparency_and_first_frame(tmp_path: Path):
    frames = []
    for colour in (RED, BLUE):
        frame = Image.new("P", (8, 8), 0)
        frame.putpalette([0, 255, 0] + list(colour) + [0] * (256 * 3 - 6))
        frame.paste(1, (0, 0, 4, 8))  # left half: colour index 1, right half: index 0 (transparent)
        frames.append(frame)
    path = tmp_path / "anim.gif"
    frames[0].save(path, save_all=True, append_images=frames[1:], transparency=0, duration=100, loop=0)
    assert Image.open(path).n_frames == 2
    image = load_image(path)
    assert image.getpixel((1, 4)) == RED  # first frame, not the blue second one
    assert image.getpixel((6, 4)) == WHITE  # transparent index composited on white, not green


def test_palette_png_without_transparency():
    image = Image.new("P", (4, 4), 2)
    image.putpalette([0, 0, 0, 0, 0, 0, 10, 20, 30] + [0] * (253 * 3))
    assert load_image(_png_bytes(image)).getpixel((0, 0)) == (10, 20, 30)


def test_exif_rotated_jpeg_is_shown_upright(tmp_path: Path):
    # Stored 60x30 (landscape): top-left 30x15 block red, rest blue. EXIF orientation 6 means "rotate 90 degrees
    # clockwise to display": the upright image is 30x60 and the stored top-left corner lands at the top-right.
    stored = Image.new("RGB", (60, 30), BLUE)
    stored.paste(RED, (0, 0, 30, 15))
    exif = Image.Exif()
    exif[0x0112] = 6
    path = tmp_path / "phone.jpg"
    stored.save(path, "JPEG", exif=exif.tobytes(), quality=95)
    image = load_image(path)
    assert image.size == (30, 60)
    assert _close(image.getpixel((25, 5)), RED)  # top-right
    assert _close(image.getpixel((5, 5)), BLUE) and _close(image.getpixel((25, 55)), BLUE)


@pytest.mark.parametrize("fmt", ["JPEG", "PNG"])
def test_large_legal_image_is_downscaled_not_refused(tmp_path: Path, fmt: str):
    big = Image.new("RGB", (3000, 1200), BLUE)
    big.paste(RED, (0, 0, 1500, 1200))
    path = tmp_path / f"big.{fmt.lower()}"
    big.save(path, fmt)
    image = load_image(path, max_side=1000)
    assert image.size == (1000, 400)
    assert _close(image.getpixel((100, 200)), RED) and _close(image.getpixel((900, 200)), BLUE)


def test_sources_file_object_pil_and_arrays_agree(tmp_path: Path):
    rng = np.random.default_rng(2)
    pixels = rng.integers(0, 256, (5, 7, 3), dtype=np.uint8)
    path = tmp_path / "small.png"
    Image.fromarray(pixels).save(path)
    with open(path, "rb") as handle:
        from_handle = np.asarray(load_image(handle))
        assert np.array_equal(np.asarray(load_image(handle)), from_handle)  # read again, as a page rerun does
    for result in (from_handle, np.asarray(load_image(path.read_bytes())), np.asarray(load_image(Image.open(path))),
                   np.asarray(load_image(pixels))):
        assert np.array_equal(result, pixels)
    assert np.array_equal(np.asarray(load_image(pixels.astype(np.uint16) * 257)), pixels)
    assert np.array_equal(np.asarray(load_image(pixels / 255.0)), pixels)
    assert np.array_equal(np.asarray(load_image(pixels.astype(np.int64))), pixels)
    mask = np.asarray(load_image(np.array([[True, False]])))
    assert mask[0, 0].tolist() == [255, 255, 255] and mask[0, 1].tolist() == [0, 0, 0]


@pytest.mark.parametrize("fmt", ["TIFF", "ICO", "PPM"])
def test_formats_outside_the_accepted_list_are_refused(tmp_path: Path, fmt: str):
    # Readable by PIL, but only PNG/JPEG/WebP/BMP/GIF are accepted, whatever the file's name says.
    path = tmp_path / "looks_fine.png"
    Image.new("RGB", (8, 8), RED).save(path, fmt)
    with pytest.raises(InputError, match="accepted format.*PNG, JPEG, WebP, BMP or GIF"):
        load_image(path)


def test_postscript_named_png_never_reaches_ghostscript(tmp_path: Path):
    path = tmp_path / "photo.png"
    path.write_bytes(b"%!PS-Adobe-3.0 EPSF-3.0\n%%BoundingBox: 0 0 10 10\nshowpage\n")
    with pytest.raises(InputError, match="accepted format"):
        load_image(path)


def test_20000_square_png_header_is_refused_before_decoding():
    data = _bomb_png(20_000, 20_000)
    with pytest.raises(SecurityError, match="400,000,000 pixels"):
        load_image(data)


def test_16bit_pixels_count_twice_against_the_budget():
    # 100x100 = 10,000 pixels: an 8-bit image fits a 15,000 budget, a 16-bit one costs 20,000 and does not.
    eight = _png_bytes(Image.new("L", (100, 100), 128))
    sixteen = _png_bytes(Image.fromarray(np.full((100, 100), 30000, np.uint16)))
    assert load_image(eight, max_pixels=15_000).size == (100, 100)
    with pytest.raises(SecurityError, match="16 bits"):
        load_image(sixteen, max_pixels=15_000)
    out = np.asarray(load_image(sixteen, max_pixels=20_000))
    assert out.shape == (100, 100, 3) and np.all(np.abs(out.astype(int) - round(30000 / 65535 * 255)) <= 1)
