"""Row-only streaming: each layer's augmented Ã written to disk by blocks of query rows during the forward,
the explained rows of every layer computed from the top layer down afterwards.

At 32k tokens the running n x n rollout is 4 GiB in float32 and each product R = Ã_l · R is n³ FLOPs, so a
long decoder cannot have the full matrix. Its explanation needs only the explained rows after each layer,
v_k = e_i^T Ã_k ··· Ã_1: carried down from the top (`maths.rollout.rollout_rows`, all_layers) they cost
L'²/2 vector-matrix products, but Ã_l is used after layers above it ran, so every Ã_l is kept on disk
meanwhile (2 GiB per layer at 32k in float16). Files are written and read with plain reads and writes (no
memory map: mapped pages would count in the process's memory) and dropped from the page cache once used.
"""
from __future__ import annotations

import os
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch

from rollout_core.errors import InputError
from rollout_core import settings

SPILL_DIR_ENV = "ROLLOUT_SPILL_DIR"
"""Folder for the temporary layer files (default: the system temporary folder)."""
FLOAT16_SCALE = 2.0**15
"""float16 files hold Ã · 2^15 (exact scaling): entries in [0, 1] stay below float16's maximum (65504) and
above its smallest normal number down to 1.9e-9, where 1/n for n = 32k (3e-5) would be subnormal."""
READ_BYTES = 64 * 2**20  # bytes of one layer read at a time in the top-down pass
DISK_MARGIN = 2**30  # free disk left untouched


@dataclass
class Spill:
    """One temporary folder holding the augmented Ã of `count` layers, each (B, n, n) in `dtype`."""

    folder: Path
    batch: int
    n: int
    count: int
    dtype: torch.dtype
    _written: set[int] = field(default_factory=set)

    @classmethod
    def create(cls, batch: int, n: int, count: int, dtype: torch.dtype | None = None) -> "Spill":
        """A new folder under ROLLOUT_SPILL_DIR; float32 when it takes at most half the free disk (None),
        else float16. Too little disk for float16 is an error that says how much is needed."""
        parent = settings.folder(SPILL_DIR_ENV) or Path(tempfile.gettempdir())
        parent.mkdir(parents=True, exist_ok=True)
        free = shutil.disk_usage(parent).free - DISK_MARGIN
        entries = count * batch * n * n
        if dtype is None:
            dtype = torch.float32 if entries * 4 <= free / 2 else torch.float16
        if dtype not in (torch.float16, torch.float32):
            raise InputError(f"layer files are float16 or float32, not {dtype}")
        needed = entries * torch.empty((), dtype=dtype).element_size()
        if needed > free:
            raise InputError(
                f"the row-only low-memory capture keeps every layer on disk: {needed / 2**30:.1f} GiB for {count} "
                f"layers x {n} tokens, but {parent} has {max(free, 0) / 2**30:.1f} GiB free; set {SPILL_DIR_ENV} to "
                "a folder on a larger disk, or shorten the input")
        return cls(Path(tempfile.mkdtemp(prefix="rollout-spill-", dir=parent)), batch, n, count, dtype)

    @property
    def nbytes(self) -> int:
        return self.count * self.batch * self.n * self.n * self.itemsize

    @property
    def itemsize(self) -> int:
        return torch.empty((), dtype=self.dtype).element_size()

    def _path(self, index: int) -> Path:
        return self.folder / f"layer{index:03d}.bin"

    def write(self, index: int, first_row: int, rows: torch.Tensor) -> None:
        """Rows first_row:first_row+k of layer `index` (the index-th layer rolled out): (B, k, n) in [0, 1]."""
        scale = FLOAT16_SCALE if self.dtype == torch.float16 else 1.0
        data = (rows * scale).to("cpu", self.dtype).contiguous().numpy()
        flags = os.O_WRONLY | os.O_CREAT
        fd = os.open(self._path(index), flags, 0o600)
        try:
            for b in range(self.batch):
                os.pwrite(fd, data[b].tobytes(), (b * self.n + first_row) * self.n * self.itemsize)
            if first_row + rows.shape[1] == self.n:  # the layer is complete: out of the page cache
                os.fdatasync(fd)
                os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)
        self._written.add(index)

    def explained_rows(self, weights: torch.Tensor) -> torch.Tensor:
        """(count, B, r, n): the rows `weights` (B, r, n) of R_k = Ã_k ··· Ã_0 for every k, from the top layer
        down (entry k has passed through layers k..0), reading each layer once in blocks of rows."""
        if len(self._written) != self.count:
            raise InputError(f"{len(self._written)} of {self.count} layers were written")
        vectors = weights.expand(self.count, -1, -1, -1).clone()
        step = max(1, READ_BYTES // (self.batch * self.n * self.itemsize))
        scale = FLOAT16_SCALE if self.dtype == torch.float16 else 1.0
        numpy_dtype = np.float16 if self.dtype == torch.float16 else np.float32
        buffer = np.empty((self.batch, step, self.n), dtype=numpy_dtype)
        for layer in range(self.count - 1, -1, -1):
            product = torch.zeros_like(vectors[layer:])
            with open(self._path(layer), "rb", buffering=0) as file:
                for first in range(0, self.n, step):
                    k = min(step, self.n - first)
                    for b in range(self.batch):
                        file.seek((b * self.n + first) * self.n * self.itemsize)
                        file.readinto(memoryview(buffer[b, :k]).cast("B"))
                    block = torch.from_numpy(buffer[:, :k]).to(vectors.device, vectors.dtype)
                    if scale != 1.0:
                        block.div_(scale)
                    product += torch.matmul(vectors[layer:, :, :, first:first + k], block)
                os.posix_fadvise(file.fileno(), 0, 0, os.POSIX_FADV_DONTNEED)
            vectors[layer:] = product
            self._path(layer).unlink()
        return vectors

    def close(self) -> None:
        """Delete the folder and every file in it (also after an error)."""
        shutil.rmtree(self.folder, ignore_errors=True)
