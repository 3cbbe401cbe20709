"""The data of an explanation: what every method returns for one input, and what figures, summaries and evaluations
read (`ExplanationData`). `rollout_core.explanation.Explanation` is the object users get: this data plus its HTML
views; the views work on the data alone, so they never import the user-facing class.

The data keeps every position the model saw (special tokens, registers, padding are *not* dropped);
`special` marks the positions that displays leave out, and `display_scores()` renormalises the rest.
Arrays are numpy (the edge of the library); the maths that produced them is torch.

`matrix` may be `Deferred`: the rolled-out methods leave the final n x n product, which no default view reads, to
its first reader (the matrix heatmap, exports, comparisons); reading `matrix` computes it then, once.
"""
from __future__ import annotations

import json
import threading
from dataclasses import dataclass, field
from typing import Any, Callable, Literal

import numpy as np


@dataclass
class Prediction:
    """One predicted label (or next token) with its probability. Zero-shot labels also carry the cosine
    similarity of the text to the label (`similarity`); their `probability` is only a softmax over the labels
    given (temperature `pipeline.heads.ZERO_SHOT_TEMPERATURE`), not a classifier's confidence."""

    label: str
    probability: float
    index: int
    similarity: float | None = None


@dataclass
class ExplanationData:
    """One explained input: the data every method returns and every view reads.

    Shapes: n = number of positions the model saw, L = number of layers rolled out
    (end_layer - start_layer), H = heads.
    """

    kind: Literal["text", "image"]
    method: str  # "rollout" | "flow" | "gradient" | "attention"
    model_name: str
    tokens: list[str]  # every position, special tokens included (images: "[CLS]", "patch r,c", ...)
    special: np.ndarray  # (n,) bool: True = left out of displays ([CLS], [SEP], padding, distillation, registers)
    scores: np.ndarray  # (n,) the explained row of the final matrix (share of each input position)
    layer_scores: np.ndarray  # (L, n) the explained row of the cumulative result after layer k (slider)
    layer_attention_scores: np.ndarray  # (L, n) the explained row of layer k's own fused attention
    matrix: np.ndarray | None  # (n, n) final matrix; None only where computing it is too costly (flow on images);
    # may be given as a `Deferred` (then computed on first read, see the module docstring)
    layer_attention: np.ndarray  # (L, n, n) raw head-fused attention per layer
    settings: dict[str, Any]  # everything needed to reproduce: model, method, options, target, lengths
    target_description: str  # plain words: "row of [CLS]", "mean of the 9 token rows", "position 4 ('sat')"
    prediction: list[Prediction] | None = None  # top labels, most probable first; None for backbones
    logits: np.ndarray | None = None  # (C,) a classifier's own class logits, before any calibration; else None
    target: str | int | None = None  # explained class label (gradient) or explained position (language models)
    text: str | None = None  # the (possibly truncated) text that was explained
    offsets: list[tuple[int, int]] | None = None  # character span of each token in `text`; (0, 0) for special
    truncation: dict[str, int] | None = None  # {"kept_chars", "total_chars", "kept_tokens"} when text was cut
    grid: tuple[int, int] | None = None  # (rows, cols) of the patch grid (images)
    patch_positions: np.ndarray | None = None  # (rows*cols,) position index of each patch, row-major
    image: np.ndarray | None = None  # (H, W, 3) uint8 RGB as the model saw it (after resize/crop)
    head_attention: np.ndarray | None = None  # (L, H, n, n) per-head attention, when asked for (keep_heads)
    extras: dict[str, Any] = field(default_factory=dict)  # family-specific views (e.g. seq2seq encoder/decoder)
    warnings: tuple[str, ...] = ()  # short notes on why the prediction may not be trusted (rollout_core.reliability)

    @property
    def signed(self) -> bool:
        """Whether the values speak for (positive) or against (negative) the explained class (AttnLRP, Shapley
        values), as the method's registry entry says (`settings["signed"]`); else they are non-negative shares."""
        return bool(self.settings.get("signed"))

    @property
    def not_meaningful(self) -> str:
        """Why this map cannot be read at all, in the method's own words (`settings["not_meaningful"]`, e.g. a pruned
        flow whose error bound is larger than the map), "" when it can: views then say so instead of drawing it."""
        return str(self.settings.get("not_meaningful") or "")

    @property
    def num_layers(self) -> int:
        return int(self.layer_scores.shape[0])

    def display_positions(self) -> np.ndarray:
        """Indices of the positions shown to the user (not special), in order."""
        return np.flatnonzero(~self.special)

    def display_tokens(self) -> list[str]:
        return [self.tokens[i] for i in self.display_positions()]

    def display_scores(self, scores: np.ndarray | None = None) -> np.ndarray:
        """`scores` (default: final) restricted to displayed positions and renormalised to sum to 1.

        Renormalising is a display choice: the share of [CLS]/[SEP] is dropped and the rest keeps its
        proportions. All zeros stay all zeros (no division by zero).
        """
        return display_shares(self.scores if scores is None else scores, self.special, self.signed)

    def score_map(self, scores: np.ndarray | None = None) -> np.ndarray:
        """Image explanations: the patch scores as a (rows, cols) map, rows = image rows, renormalised."""
        if self.grid is None or self.patch_positions is None:
            raise ValueError("score_map is only defined for image explanations")
        values = np.asarray(self.scores if scores is None else scores, dtype=np.float64)
        patches = values[self.patch_positions]
        total = np.abs(patches).sum() if self.signed else patches.sum()
        patches = patches / total if total > 0 else patches
        return patches.reshape(self.grid)

    def to_dict(self, *, include_matrices: bool = False) -> dict[str, Any]:
        """JSON-ready dict: tokens, scores, layer_scores, prediction, settings (matrices on request)."""
        out: dict[str, Any] = {
            "kind": self.kind,
            "method": self.method,
            "model": self.model_name,
            "tokens": self.tokens,
            "special": self.special.tolist(),
            "scores": _floats(self.scores),
            "display_tokens": self.display_tokens(),
            "display_scores": _floats(self.display_scores()),
            "layer_scores": _floats(self.layer_scores),
            "prediction": None
            if self.prediction is None
            else [{"label": p.label, "probability": p.probability, "index": p.index,
                   **({} if p.similarity is None else {"similarity": p.similarity})} for p in self.prediction],
            "logits": None if self.logits is None else _floats(self.logits),
            "target": self.target,
            "target_description": self.target_description,
            "settings": self.settings,
        }
        if self.text is not None:
            out["text"] = self.text
            out["offsets"] = [list(o) for o in self.offsets] if self.offsets is not None else None
        if self.truncation is not None:
            out["truncation"] = self.truncation
        if self.warnings:
            out["warnings"] = list(self.warnings)
        if self.grid is not None:
            out["grid"] = list(self.grid)
            out["score_map"] = _floats(self.score_map())
        if self.extras:
            out["extras"] = {key: _jsonable(value, include_matrices) for key, value in self.extras.items()
                             if include_matrices or not _is_matrix(value)}
        if include_matrices:
            out["matrix"] = None if self.matrix is None else _floats(self.matrix)
            out["layer_attention"] = _floats(self.layer_attention)
        return out

    def to_json(self, **kwargs: Any) -> str:
        return json.dumps(self.to_dict(**kwargs), ensure_ascii=False)


class Deferred:
    """A value computed on first use, once: `compute` is a picklable function of no arguments (a functools.partial
    of a module-level function over numpy arrays, never of a model) and `nbytes` the bytes its value will hold, which
    `lru.size_of` counts before it exists. Threads asking at once compute it once (a lock); the inputs are dropped
    once it is computed. Pickles as its inputs, or as its value once computed."""

    def __init__(self, compute: Callable[[], Any], nbytes: int) -> None:
        self.nbytes = int(nbytes)
        self._compute: Callable[[], Any] | None = compute
        self._value: Any = None
        self._lock = threading.Lock()

    def value(self) -> Any:
        if self._compute is not None:
            with self._lock:
                if self._compute is not None:
                    self._value = self._compute()
                    self._compute = None
        return self._value

    def __getstate__(self) -> dict[str, Any]:
        return {"nbytes": self.nbytes, "compute": self._compute, "value": self._value}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.nbytes, self._compute, self._value = state["nbytes"], state["compute"], state["value"]
        self._lock = threading.Lock()


def _read_matrix(self: ExplanationData) -> np.ndarray | None:
    stored = self.__dict__.get("matrix")
    if isinstance(stored, Deferred):
        stored = stored.value()
        self.__dict__["matrix"] = stored
    return stored


def _write_matrix(self: ExplanationData, value: np.ndarray | Deferred | None) -> None:
    self.__dict__["matrix"] = value


# A property set after the dataclass is made (a property in the class body would be taken for the field's default):
# the field stays a plain constructor argument, reading it resolves a Deferred.
ExplanationData.matrix = property(  # type: ignore[assignment]
    _read_matrix, _write_matrix, doc="(n, n) final matrix, computed on this first read when it was deferred")


def display_shares(scores: np.ndarray, special: np.ndarray, signed: bool = False) -> np.ndarray:
    """`scores` at the positions not `special`, renormalised to sum to 1 (all zeros stay zeros); `signed` values
    (evidence for and against) are divided by the sum of their sizes instead, so they keep their signs and lie
    in -1..1 (a plain sum of mixed signs can be near 0 and blow every share up)."""
    shown = np.asarray(scores, dtype=np.float64)[np.flatnonzero(~np.asarray(special, dtype=bool))]
    total = np.abs(shown).sum() if signed else shown.sum()
    return shown / total if total > 0 else shown


def _is_matrix(value: Any) -> bool:
    return isinstance(value, np.ndarray) and value.ndim >= 2


def _jsonable(value: Any, include_matrices: bool) -> Any:
    """Family-specific extras (numpy arrays, tuples, scalars) as JSON values."""
    if isinstance(value, np.ndarray):
        return _floats(value) if value.dtype.kind == "f" else value.tolist()
    if isinstance(value, (list, tuple)):
        return [_jsonable(v, include_matrices) for v in value]
    if isinstance(value, (np.integer, np.floating)):
        return value.item()
    return value


def _floats(values: np.ndarray) -> Any:
    """Nested lists of Python floats, rounded to 7 significant digits for compact JSON."""
    return np.vectorize(lambda v: float(f"{v:.7g}"), otypes=[float])(np.asarray(values, dtype=np.float64)).tolist()
