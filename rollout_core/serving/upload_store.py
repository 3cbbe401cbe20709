"""A bounded in-memory store of the inputs a link can name: uploaded images and texts too long for a URL, each
kind in its own part, each entry with its owner (the visitor who stored it).

A page puts an input in, writes its digest into its URL, and a later session opening that link gets it back, or
None once it was evicted, or when the link names an input of the other kind, so the page can say this server does
not have it instead of showing another input (or failing on an image's bytes read as text).

Fair share: images and texts are bounded apart (a stream of long texts cannot evict an image), and when a part
is full the visitor storing an input gives up its own oldest inputs of that kind first; only a visitor with none
left there takes the room of the oldest input of others.
"""
from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass

from rollout_core.lru import LRUCache

DIGEST_CHARS = 16
"""Hex characters of the SHA-256 kept in a link (64 bits: collisions are not a concern at this size)."""
_DIGEST = re.compile(rf"[0-9a-f]{{{DIGEST_CHARS}}}")


def digest(data: bytes) -> str:
    """The link name of `data`: the first DIGEST_CHARS hex characters of its SHA-256."""
    return hashlib.sha256(data).hexdigest()[:DIGEST_CHARS]


def is_digest(value: str) -> bool:
    """Whether `value` has the form of a `digest` (a link may carry anything)."""
    return bool(_DIGEST.fullmatch(value))


@dataclass(frozen=True)
class Upload:
    """One stored image: its bytes, the file name it came with, and who stored it."""

    data: bytes
    name: str
    owner: str = ""


@dataclass(frozen=True)
class _Text:
    text: str
    owner: str


class UploadStore:
    """Images by digest (at most `max_count` and `max_bytes` in all) and texts by digest (at most `text_count` and
    `text_bytes`); safe to share between sessions; storing an input again makes it the newest."""

    def __init__(self, max_count: int = 64, max_bytes: int = 256 * 2**20, text_count: int = 128,
                 text_bytes: int = 64 * 2**20) -> None:
        if min(max_count, max_bytes, text_count, text_bytes) < 1:
            raise ValueError("an upload store needs room for at least one item of each kind")
        self._images = LRUCache(max_items=lambda: max_count, max_bytes=lambda: max_bytes,
                                size=lambda upload: len(upload.data))
        self._texts = LRUCache(max_items=lambda: text_count, max_bytes=lambda: text_bytes,
                               size=lambda stored: len(stored.text.encode("utf-8", "surrogatepass")))

    def put_image(self, data: bytes, name: str = "", owner: str = "") -> str:
        """Keep the image `data` (unless larger than the images' part) for `owner`; its digest."""
        key = digest(data)
        self._images.put(key, Upload(bytes(data), name, owner), evict_first=lambda old: old.owner == owner)
        return key

    def put_text(self, text: str, owner: str = "") -> str:
        """Keep `text` for `owner`; its digest (of its UTF-8 bytes; a lone surrogate from a URL is kept as is)."""
        key = digest(text.encode("utf-8", "surrogatepass"))
        self._texts.put(key, _Text(text, owner), evict_first=lambda old: old.owner == owner)
        return key

    def image(self, key: str) -> Upload | None:
        """The image named `key`, or None (never stored, evicted, or not an image). Reading a link does not keep
        an input longer."""
        return self._images.peek(key)

    def text(self, key: str) -> str | None:
        """The text named `key`, or None (never stored, evicted, or not a text)."""
        stored = self._texts.peek(key)
        return None if stored is None else stored.text

    def size(self) -> int:
        """Bytes held (texts by their UTF-8 length)."""
        return self._images.total_bytes + self._texts.total_bytes

    def __len__(self) -> int:
        return len(self._images) + len(self._texts)
