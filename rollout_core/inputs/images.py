"""Safe image decoding for the core, the pages and the CLI.

`load_image` turns whatever the user gave (a path, uploaded bytes, a file object, a PIL image, an array)
into an upright RGB `PIL.Image.Image` of bounded size, or raises a `RolloutError` that says what is wrong:
- only PNG, JPEG, WebP, BMP and GIF are opened (`ACCEPTED_FORMATS`): PIL is never asked to guess among its
  other decoders (TIFF, EPS -> Ghostscript, ...), whatever the file's name;
- a declared pixel count above `max_pixels` (16-bit pixels count twice, 32-bit four times: decoding cost is
  pixels x bit depth), or a side more than `MAX_ASPECT_RATIO` times the other, is
  refused with `SecurityError` from the header alone, before any pixel is decoded (a decompression bomb
  costs nothing);
- not an image, an empty or truncated file -> `InputError`;
- EXIF orientation is applied; an animated image gives its first frame;
- every PIL mode becomes RGB with its meaning kept: transparency is composited on white, 16-bit and float
  images are rescaled (PIL's own `convert("RGB")` clips them to white), CMYK is converted;
- a legal but large image is downscaled so that its longest side is at most `max_side` (JPEGs are
  decoded directly at a reduced scale when possible).
"""
from __future__ import annotations

import io
import re
from pathlib import Path
from typing import Any, BinaryIO, Union

import numpy as np
from PIL import Image, ImageOps, UnidentifiedImageError

from rollout_core.errors import InputError, SecurityError
from rollout_core import settings

"""Refuse images declaring more pixels than this unless env `ROLLOUT_MAX_IMAGE_PIXELS` says otherwise."""
ACCEPTED_FORMATS = ("PNG", "JPEG", "WEBP", "BMP", "GIF")
"""The only decoders PIL may use on user data."""
_WIDE_MODES = {"I;16": 2, "I;16B": 2, "I;16L": 2, "I;16N": 2, "I": 4, "F": 4}
"""Pixel weight of modes wider than 8 bits per sample: their decode and rescale cost that much more."""
MAX_ASPECT_RATIO = 100
"""Refuse images whose long side is more than this many times the short side: processors that resize the
short side (DINOv2, BEiT: shortest_edge 256) would turn a 4096x1 strip into 1,048,576x256 pixels (~4 GB)."""

ImageSource = Union[str, Path, bytes, bytearray, BinaryIO, Image.Image, np.ndarray]

_DECODE_ERRORS = (OSError, SyntaxError, ValueError, EOFError, IndexError, TypeError)


def max_image_pixels() -> int:
    """The pixel budget: env ROLLOUT_MAX_IMAGE_PIXELS (e.g. 40e6; default in `rollout_core.settings`)."""
    return int(settings.number("ROLLOUT_MAX_IMAGE_PIXELS"))


def load_image(source: ImageSource, *, max_pixels: int | None = None, max_side: int = 4096) -> Image.Image:
    """Decode `source` into an upright RGB image with longest side <= `max_side`.

    Raises `SecurityError` when the image declares more than `max_pixels` pixels (default: the
    ROLLOUT_MAX_IMAGE_PIXELS setting) and `InputError` when
    it is not a readable image.
    """
    if max_side < 1:
        raise ValueError("max_side must be at least 1")
    max_pixels = max_image_pixels() if max_pixels is None else max_pixels
    if isinstance(source, Image.Image):
        image = source
    elif isinstance(source, np.ndarray):
        image = _from_array(source, max_pixels)
    else:
        image = _open(_read_bytes(source))
    _check_size(image.size, max_pixels, _WIDE_MODES.get(image.mode, 1))
    try:
        if getattr(image, "format", None) == "JPEG" and max(image.size) > max_side:
            image.draft(image.mode, _fit(image.size, max_side))  # decode at 1/2, 1/4 or 1/8 scale
        image.seek(0)  # first frame of an animation
        image.load()
        image = ImageOps.exif_transpose(image)
        rgb = _to_rgb(image)
    except _DECODE_ERRORS as err:
        raise InputError(f"the image file is truncated or corrupt and cannot be decoded ({err})") from err
    if max(rgb.size) > max_side:
        rgb = rgb.resize(_fit(rgb.size, max_side), Image.LANCZOS)
    return rgb


def model_pixels(processor: Any, picture: Image.Image) -> Any:
    """The model's `pixel_values` (1, C, H, W) of a `load_image` picture, or `InputError` when the model's
    processor cannot prepare it."""
    try:
        return processor(images=picture, return_tensors="pt")["pixel_values"]
    except (ValueError, TypeError, RuntimeError) as err:
        raise InputError(f"the image processor could not prepare this image: {err}") from err


def _read_bytes(source: str | Path | bytes | bytearray | BinaryIO) -> bytes:
    if isinstance(source, (bytes, bytearray, memoryview)):
        data = bytes(source)
        where = "the uploaded data"
    elif isinstance(source, (str, Path)):
        path = Path(source).expanduser()
        if not path.is_file():
            raise InputError(f"no image file at {str(path)!r}")
        data = path.read_bytes()
        where = f"the file {path.name!r}"
    elif hasattr(source, "read"):
        if getattr(source, "seekable", lambda: False)():
            source.seek(0)  # Streamlit reruns read the same UploadedFile again: start from its beginning
        data = source.read()
        if not isinstance(data, (bytes, bytearray)):
            raise InputError("the image stream must be opened in binary mode")
        where = "the uploaded file"
    else:
        raise InputError(f"cannot read an image from a {type(source).__name__}; give a path, bytes or an image")
    if not data:
        raise InputError(f"{where} is empty (0 bytes): not an image")
    return bytes(data)


def _open(data: bytes) -> Image.Image:
    """Open lazily: PIL reads only the header here, so the size check happens before decoding."""
    try:
        return Image.open(io.BytesIO(data), formats=ACCEPTED_FORMATS)
    except Image.DecompressionBombError as err:
        declared = re.search(r"\((\d+) pixels\)", str(err))
        amount = f"{int(declared.group(1)):,} pixels" if declared else "too many pixels"
        raise SecurityError(f"image refused: its header declares {amount}, far above the limit "
                            "(a possible decompression bomb); use a smaller image") from err
    except UnidentifiedImageError as err:
        raise InputError("this is not an image in an accepted format: give a PNG, JPEG, WebP, BMP or GIF file "
                         "(convert other formats such as TIFF first)") from err
    except _DECODE_ERRORS as err:
        raise InputError(f"the image header is corrupt ({err})") from err


def _check_size(size: tuple[int, int], max_pixels: int, weight: int = 1) -> None:
    """Refuse from the header: `weight` is how many 8-bit pixels one pixel costs (2 for 16-bit samples)."""
    width, height = size
    if width < 1 or height < 1:
        raise InputError(f"the image has no pixels ({width}x{height})")
    if width * height * weight > max_pixels:
        depth = f" at {8 * weight} bits per sample (counted {weight} times)" if weight > 1 else ""
        raise SecurityError(
            f"image refused: {width}x{height} = {width * height:,} pixels{depth} is above the limit of "
            f"{max_pixels:,} pixels (a possible decompression bomb); use a smaller image or raise the limit"
        )
    if max(width, height) > MAX_ASPECT_RATIO * min(width, height):
        raise SecurityError(
            f"image refused: {width}x{height} has a long side more than {MAX_ASPECT_RATIO} times its short side; "
            "resizing it for a model could need gigabytes. Crop it to a less extreme shape"
        )


def _fit(size: tuple[int, int], max_side: int) -> tuple[int, int]:
    scale = max_side / max(size)
    return max(1, round(size[0] * scale)), max(1, round(size[1] * scale))


def _to_rgb(image: Image.Image) -> Image.Image:
    """Convert any PIL mode to RGB, keeping brightness and compositing transparency on white."""
    mode = image.mode
    if mode == "RGB":
        return image
    if mode.startswith("I") or mode == "F":
        return _from_array(np.asarray(image), max_pixels=None)
    if mode in ("RGBA", "LA", "PA", "RGBa", "La") or (mode == "P" and "transparency" in image.info):
        rgba = image.convert("RGBA")
        white = Image.new("RGBA", rgba.size, (255, 255, 255, 255))
        return Image.alpha_composite(white, rgba).convert("RGB")
    if mode == "P":
        return image.convert("RGB")
    try:
        return image.convert("RGB")
    except ValueError as err:
        raise InputError(f"images in colour mode {mode!r} are not supported; convert it to RGB first") from err


def _from_array(array: np.ndarray, max_pixels: int | None) -> Image.Image:
    """An array (H, W), (H, W, 1|3|4) of uint8, uint16, integers, bool or floats -> RGB PIL image.

    uint16 (PIL's 16-bit modes) is read as 0..65535, other integers as 0..255 when they fit, else as 16-bit;
    floats in [0, 1] as 0..1, any other float range is stretched from its min to its max.
    """
    if array.ndim == 3 and array.shape[2] == 1:
        array = array[..., 0]
    if array.ndim not in (2, 3) or (array.ndim == 3 and array.shape[2] not in (3, 4)):
        raise InputError(f"an image array must be (H, W), (H, W, 3) or (H, W, 4); got shape {array.shape}")
    if max_pixels is not None:
        _check_size((array.shape[1], array.shape[0]), max_pixels)
    array = _as_uint8(array)
    if array.ndim == 2:
        return Image.fromarray(array, "L").convert("RGB")
    if array.shape[2] == 4:
        return _to_rgb(Image.fromarray(array, "RGBA"))
    return Image.fromarray(array, "RGB")


def _as_uint8(array: np.ndarray) -> np.ndarray:
    if array.dtype == np.uint8:
        return np.ascontiguousarray(array)
    if array.dtype == bool:
        return array.astype(np.uint8) * 255
    if np.issubdtype(array.dtype, np.integer):
        if array.dtype != np.uint16 and array.min() >= 0 and array.max() <= 255:
            return array.astype(np.uint8)
        scaled = np.clip(array.astype(np.float64), 0, 65535) / 257.0
        return np.round(scaled).astype(np.uint8)
    if np.issubdtype(array.dtype, np.floating):
        values = np.nan_to_num(array.astype(np.float64), nan=0.0, posinf=0.0, neginf=0.0)
        low, high = float(values.min()), float(values.max())
        if low < 0.0 or high > 1.0:
            values = (values - low) / (high - low) if high > low else np.zeros_like(values)
        return np.round(values * 255.0).astype(np.uint8)
    raise InputError(f"image arrays of dtype {array.dtype} are not supported")
