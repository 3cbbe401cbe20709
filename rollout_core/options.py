"""One frozen options object for every method: what the explanation computes, passed whole.

`Options` is hashable, so the pages use it as their cache key, and `Explanation.settings` is built from it.
It imports no torch, so the command line can validate a request before the heavy imports.
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass, replace
from typing import Any

from rollout_core.errors import InputError

HEAD_FUSIONS = ("mean", "max", "min")
CAPTURES = ("auto", "full", "lowmem")
RESIDUAL_RANGE = (0.0, 3.0)
"""The residual weights the dashboard offers; the library accepts any w >= 0."""
DISCARD_RANGE = (0.0, 0.95)
"""The discard ratios the dashboard offers; the library accepts any value in [0, 1)."""


@dataclass(frozen=True)
class Options:
    """The method and its settings. `end_layer` None means "all layers" until `for_model` resolves it."""

    method: str = "rollout"
    head_fusion: str = "mean"
    residual_weight: float = 1.0
    discard_ratio: float = 0.0
    start_layer: int = 0
    end_layer: int | None = None

    def checked(self) -> "Options":
        """The same options with every value validated (a clear InputError otherwise) and numbers as floats."""
        from rollout_core.methods import get

        get(self.method)
        if self.head_fusion not in HEAD_FUSIONS:
            raise InputError(f"unknown head fusion {self.head_fusion!r}; choose one of: {', '.join(HEAD_FUSIONS)}")
        residual = _number("residual_weight", self.residual_weight)
        if residual < 0:
            raise InputError(f"residual_weight must be 0 or more, not {self.residual_weight}")
        discard = _number("discard_ratio", self.discard_ratio)
        if not 0.0 <= discard < 1.0:
            raise InputError(f"discard_ratio must be in [0, 1), not {self.discard_ratio}")
        _integer("start_layer", self.start_layer)
        if self.end_layer is not None:
            _integer("end_layer", self.end_layer)
        return replace(self, residual_weight=residual, discard_ratio=discard)

    def for_model(self, num_layers: int) -> "Options":
        """Checked, with the layer range resolved against a model of `num_layers` layers (negative = from the end)."""
        opts = self.checked()
        start = _in_range("start_layer", opts.start_layer, num_layers, num_layers)
        end = num_layers if opts.end_layer is None else _in_range("end_layer", opts.end_layer, num_layers + 1,
                                                                   num_layers)
        if end <= start:
            raise InputError(f"end_layer ({end}) must be greater than start_layer ({start}); "
                             f"the model has {num_layers} layers")
        return replace(opts, start_layer=start, end_layer=end)

    @property
    def layers(self) -> int:
        """How many layers the (resolved) range covers."""
        if self.end_layer is None:
            raise ValueError("resolve the options with for_model first")
        return self.end_layer - self.start_layer

    def settings(self) -> dict[str, Any]:
        """The options as plain values, for `Explanation.settings` and JSON."""
        return asdict(self)


def _number(name: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise InputError(f"{name} must be a finite number, not {value!r}")
    return float(value)


def _integer(name: str, value: Any) -> None:
    if isinstance(value, bool) or not isinstance(value, int) and not hasattr(value, "__index__"):
        raise InputError(f"{name} must be an integer, not {value!r}")


def _in_range(name: str, value: Any, bound: int, num_layers: int) -> int:
    value = int(value) + (bound if int(value) < 0 else 0)
    if not 0 <= value < bound:
        raise InputError(f"{name} {value} is out of range: the model has {num_layers} layers")
    return value
