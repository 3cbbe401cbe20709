"""The accumulator of a streaming capture: one per capture, fed one layer's head-fused attention at a
time, it keeps the running rollout R = Ã_l · R and the explained rows after each layer."""
from __future__ import annotations

import contextvars
import threading
from dataclasses import dataclass, field

import torch

from rollout_core.errors import InputError, UnsupportedModelError
from rollout_core.maths.rollout import augment_layer

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
    calls: int = 0
    sdpa_layers: int = 0
    rollout: torch.Tensor | None = None
    layer_rows: list[torch.Tensor] = field(default_factory=list)
    layer_attention_rows: list[torch.Tensor] = field(default_factory=list)
    _fused: torch.Tensor | None = None

    def next_layer(self) -> int:
        layer = self.calls
        self.calls += 1
        return layer

    def wants(self, layer: int) -> bool:
        return layer in self.layers

    def add(self, fused: torch.Tensor) -> None:
        """Fold one layer's head-fused attention (B, n, n) into R (float32 or wider)."""
        fused = fused if fused.dtype in (torch.float32, torch.float64) else fused.float()
        n = fused.shape[-1]
        if self.rows is not None and any(not 0 <= r < n for r in self.rows):
            raise InputError(f"Explained rows {self.rows} are outside the {n} positions of the input.")
        self.layer_attention_rows.append(self._raw_rows(fused))
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

    def fused_buffer(self, batch: int, n: int, dtype: torch.dtype, device: torch.device) -> torch.Tensor:
        """(B, n, n) buffer for one layer's fused attention, reused across layers."""
        buffer = self._fused
        if buffer is None or buffer.shape != (batch, n, n) or buffer.dtype != dtype or buffer.device != device:
            buffer = self._fused = torch.empty(batch, n, n, dtype=dtype, device=device)
        return buffer

    def _raw_rows(self, fused: torch.Tensor) -> torch.Tensor:
        """The explained rows of `layer_attention` (padded rows and columns 0, real rows renormalised),
        computed on those rows only: running layer_attention on the whole (B, n, n) layer would add
        several n x n temporaries to the peak. Tests pin it to layer_attention."""
        rows = self._rows(fused).clamp_min(0.0)
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
