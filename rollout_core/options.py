"""The method options, torch-free so the command line can check a request before the heavy imports."""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

HEAD_FUSIONS = ("mean", "max", "min")
CAPTURES = ("auto", "full", "lowmem")


@dataclass(frozen=True)
class Options:
    """Method options, passed whole: frozen, so the pages key their caches on it.

    As asked for (the sidebar, `explain_text(**options.kwargs())`) `end_layer` may be None (through the last
    layer); the validated object a method's compute receives has it resolved to a number."""

    method: str = "rollout"
    head_fusion: str = "mean"
    residual_weight: float = 1.0
    discard_ratio: float = 0.0
    start_layer: int = 0
    end_layer: int | None = None
    keep_heads: bool = False
    capture: str = "auto"
    full_matrix: bool = False  # compute the whole final matrix even where it is costly (flow: n² max flows)

    @property
    def layers(self) -> int:
        if self.end_layer is None:
            raise ValueError("end_layer is not resolved yet (explain resolves it against the model)")
        return self.end_layer - self.start_layer

    def kwargs(self) -> dict[str, Any]:
        """The options as keyword arguments of `explain_text`, `explain_image` and the faithfulness evaluation."""
        return dataclasses.asdict(self)
