"""A bounded in-memory store of uploaded inputs keyed by a content hash, so a link can name an upload.

A page puts an upload in, writes `digest(data)` into its URL, and a later session opening that link gets the
same bytes back, or None once they were evicted (oldest first, past `max_count` items or `max_bytes` in all),
so the page can say the upload is gone instead of showing another input.
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
    """One stored upload: its bytes and the file name it came with."""

    data: bytes
    name: str


class UploadStore:
    """Uploads by digest, at most `max_count` of them and `max_bytes` in all; the oldest go first.
    Safe to share between sessions; putting an upload again makes it the newest."""

    def __init__(self, max_count: int = 64, max_bytes: int = 256 * 2**20) -> None:
        if max_count < 1 or max_bytes < 1:
            raise ValueError("an upload store needs room for at least one item")
        self.max_count, self.max_bytes = max_count, max_bytes
        self._cache = LRUCache(max_items=lambda: max_count, max_bytes=lambda: max_bytes,
                               size=lambda upload: len(upload.data))

    def put(self, data: bytes, name: str = "") -> str:
        """Keep `data` (unless larger than the whole store) and return its digest."""
        key = digest(data)
        self._cache.put(key, Upload(bytes(data), name))
        return key

    def get(self, key: str) -> Upload | None:
        """The upload named `key`, or None when it was never here or has been evicted."""
        return self._cache.peek(key)  # reading a link does not keep an upload longer

    def size(self) -> int:
        """Bytes held."""
        return self._cache.total_bytes

    def __len__(self) -> int:
        return len(self._cache)
