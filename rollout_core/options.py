"""The method options, torch-free so the command line can check a request before the heavy imports."""
from __future__ import annotations

from dataclasses import dataclass

HEAD_FUSIONS = ("mean", "max", "min")
CAPTURES = ("auto", "full", "lowmem")


@dataclass(frozen=True)
class Options:
    """Validated method options (end_layer resolved to a number), passed whole to a method's compute."""

    method: str
    head_fusion: str
    residual_weight: float
    discard_ratio: float
    start_layer: int
    end_layer: int
    keep_heads: bool
    capture: str
    full_matrix: bool = False  # compute the whole final matrix even where it is costly (flow: n² max flows)

    @property
    def layers(self) -> int:
        return self.end_layer - self.start_layer
