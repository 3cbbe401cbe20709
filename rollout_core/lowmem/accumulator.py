"""The accumulator of a streaming capture: one per capture, fed one layer's head-fused attention at a
time, it keeps the running rollout R = Ã_l · R and the explained rows after each layer; in row-only mode
it is fed blocks of query rows instead and writes each layer's Ã to disk (`spill`) for the rows afterwards."""
from __future__ import annotations

import contextvars
import threading
from dataclasses import dataclass, field

import torch

from rollout_core.errors import InputError, UnsupportedModelError
from rollout_core.lowmem.spill import Spill
from rollout_core.maths.rollout import augment_layer, real_token_mask
from rollout_core.maths.row_step import clean_rows, residual_normalise_

LOCK = threading.RLock()
"""Held while a capture switches a model's attention implementation or hooks it."""
ACTIVE: contextvars.ContextVar["Accumulator | None"] = contextvars.ContextVar("rollout_stream", default=None)
"""The accumulator of the capture running in this context (None outside a capture)."""


@dataclass
class Accumulator:
    head_fusion: str
    residual_weight: float
    discard_ratio: float
    num_layers: int
    layers: range  # the layers rolled out, as rollout_core.maths.rollout.layer_range selects them
    rows: list[int] | None
    padding_mask: torch.Tensor | None
    row_only: bool = False  # no n x n matrix: each layer's Ã to disk, rows from the top down afterwards
    spill_dtype: torch.dtype | None = None  # the files' dtype in row-only mode (None: Spill.create chooses)
    spill: Spill | None = None
    calls: int = 0
    sdpa_layers: int = 0
    rollout: torch.Tensor | None = None
    layer_rows: list[torch.Tensor] = field(default_factory=list)
    layer_attention_rows: list[torch.Tensor] = field(default_factory=list)
    _fused: torch.Tensor | None = None
    _raw: torch.Tensor | None = None  # row-only mode: the explained raw rows of the layer being fed

    def next_layer(self) -> int:
        layer = self.calls
        self.calls += 1
        return layer

    def wants(self, layer: int) -> bool:
        return layer in self.layers

    def add(self, fused: torch.Tensor) -> None:
        """Fold one layer's head-fused attention (B, n, n) into R (float32 or wider)."""
        if self.row_only:
            self.add_rows(fused, 0)
            self.end_layer()
            return
        fused = fused if fused.dtype in (torch.float32, torch.float64) else fused.float()
        self._check_rows(fused.shape[-1])
        self.layer_attention_rows.append(self._raw_rows(self._rows(fused)))
        step = augment_layer(
            fused,
            residual_weight=self.residual_weight,
            discard_ratio=self.discard_ratio,
            attention_mask=self.padding_mask,
        )
        if step.untyped_storage().data_ptr() == fused.untyped_storage().data_ptr():
            step = step.clone()  # the fused buffer is overwritten by the next layer
        # no spare buffer kept for the product: it would sit beside augment_layer's temporaries at the peak
        self.rollout = step if self.rollout is None else torch.matmul(step, self.rollout)
        del step
        self.layer_rows.append(self._rows(self.rollout).clone())

    def add_rows(self, block: torch.Tensor, first_row: int) -> None:
        """Row-only mode: query rows first_row:first_row+k (B, k, n) of the current layer's fused attention;
        their explained raw rows are kept, their Ã rows written to disk."""
        block = block if block.dtype in (torch.float32, torch.float64) else block.float()
        batch, k, n = block.shape
        if self.spill is None:
            if self.rows is None:
                raise InputError("the row-only low-memory capture needs the explained rows")
            self._check_rows(n)
            self.spill = Spill.create(batch, n, len(self.layers), self.spill_dtype)
        if self._raw is None:
            self._raw = block.new_zeros(batch, len(self.rows), n)
        for index, row in enumerate(self.rows):
            if first_row <= row < first_row + k:
                self._raw[:, index] = block[:, row - first_row]
        real = None if self.padding_mask is None else real_token_mask(self.padding_mask, batch, n, block.device,
                                                                       block.dtype)
        step = residual_normalise_(clean_rows(block, real, first_row, block.dtype), first_row, self.residual_weight,
                                   real)
        self.spill.write(len(self.layer_attention_rows), first_row, step)

    def end_layer(self) -> None:
        """Row-only mode: the current layer has been fed whole."""
        self.layer_attention_rows.append(self._raw_rows(self._raw))
        self._raw = None

    def finish(self) -> None:
        """Row-only mode, after the forward: the explained rows of every layer, from the files."""
        if self.spill is not None:
            weights = torch.zeros(self.spill.batch, len(self.rows), self.spill.n,
                                  device=self.layer_attention_rows[0].device)
            weights[:, torch.arange(len(self.rows)), torch.tensor(self.rows)] = 1.0
            self.layer_rows = list(self.spill.explained_rows(weights).unbind(0))

    def close(self) -> None:
        """Delete the layer files, if any (also after an error)."""
        if self.spill is not None:
            self.spill.close()

    def _check_rows(self, n: int) -> None:
        if self.rows is not None and any(not 0 <= r < n for r in self.rows):
            raise InputError(f"Explained rows {self.rows} are outside the {n} positions of the input.")

    def fused_buffer(self, batch: int, n: int, dtype: torch.dtype, device: torch.device) -> torch.Tensor:
        """(B, n, n) buffer for one layer's fused attention, reused across layers."""
        buffer = self._fused
        if buffer is None or buffer.shape != (batch, n, n) or buffer.dtype != dtype or buffer.device != device:
            buffer = self._fused = torch.empty(batch, n, n, dtype=dtype, device=device)
        return buffer

    def _raw_rows(self, rows: torch.Tensor) -> torch.Tensor:
        """The explained rows (B, r, n) of `layer_attention` (padded rows and columns 0, real rows
        renormalised), computed on those rows only: running layer_attention on the whole (B, n, n) layer
        would add several n x n temporaries to the peak. Tests pin it to layer_attention."""
        rows = rows.clamp_min(0.0)
        if self.padding_mask is not None:
            real = (self.padding_mask.to(rows.device) > 0).to(rows.dtype)
            rows = rows * self._rows(real[:, :, None]) * real[:, None, :]
        sums = rows.sum(dim=-1, keepdim=True)
        return torch.where(sums > 0, rows / sums.clamp_min(torch.finfo(rows.dtype).tiny), rows)

    def _rows(self, matrix: torch.Tensor) -> torch.Tensor:
        return matrix if self.rows is None else matrix[:, self.rows, :]

    def check(self) -> None:
        """Every layer of the model went through the capture (else its rollout would be wrong)."""
        if self.calls != self.num_layers:
            raise UnsupportedModelError(
                f"The model has {self.num_layers} layers but ran {self.calls} attention calls through the "
                "low-memory capture; use capture='full' for this model."
            )
