"""The pages' only way into rollout_core: cached model loads, cached explanations, and error boxes.

Models are loaded once per process (`st.cache_resource`). Explanations are cached per (model, input,
settings) in a bounded resource cache that hands back the same object, so moving the layer slider or
changing a display option redraws without running the model again (and without unpickling a copy).
The core functions are looked up at call time (`explain.explain_text`), so tests can count calls.
"""
from __future__ import annotations

import hashlib
import threading
import traceback
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Iterator

import streamlit as st

from app_pages._lib.safe import safe_text
from rollout_core.errors import RolloutError


@dataclass(frozen=True)
class Method:
    """The method settings of the sidebar, hashable so they can key the explanation cache."""

    method: str = "rollout"
    head_fusion: str = "mean"
    residual_weight: float = 1.0
    discard_ratio: float = 0.0
    start_layer: int = 0
    target: str | int | None = None

    def kwargs(self) -> dict[str, Any]:
        return dict(method=self.method, head_fusion=self.head_fusion, residual_weight=self.residual_weight,
                    discard_ratio=self.discard_ratio, start_layer=self.start_layer, target=self.target)


_LOAD_LOCK = threading.Lock()
"""Loads of different models from parallel sessions run one at a time: transformers' lazy imports are not
thread-safe (two first loads at once raised `ImportError: cannot import name 'CONFIG_MAPPING'`)."""


@st.cache_resource(max_entries=6, show_spinner=False)
def load(name: str, allow_pickle: bool = False) -> Any:
    """A `ModelHandle`, loaded once per process (the core also de-duplicates concurrent loads)."""
    from rollout_core.models import loading

    with _LOAD_LOCK:
        return loading.load_model(name, allow_pickle=allow_pickle)


@st.cache_resource(max_entries=64, show_spinner=False)
def explain_text(name: str, allow_pickle: bool, text: str, method: Method, labels: tuple[str, ...] | None = None,
                 keep_heads: bool = True) -> Any:
    """`rollout_core.explain_text`, cached on the model name, text and settings."""
    from rollout_core import explain

    return explain.explain_text(load(name, allow_pickle), text, keep_heads=keep_heads,
                                labels=list(labels) if labels else None, **method.kwargs())


@st.cache_resource(max_entries=32, show_spinner=False, hash_funcs={bytes: lambda b: hashlib.sha256(b).hexdigest()})
def explain_image(name: str, allow_pickle: bool, image: bytes, method: Method) -> Any:
    """`rollout_core.explain_image` on the image bytes, cached on the model name, image digest and settings."""
    from rollout_core import explain

    return explain.explain_image(load(name, allow_pickle), image, **method.kwargs())


@contextmanager
def guarded(what: str) -> Iterator[None]:
    """Show a RolloutError as its message, anything else as a short box with details folded away.

    Use as `with guarded("explaining the text"): ...`; the page goes on after the block either way.
    """
    try:
        yield
    except RolloutError as err:
        st.error(safe_text(err))
    except Exception as err:  # a bug: keep the page usable, do not throw a traceback at the user
        st.error(safe_text(f"Unexpected error while {what}: {type(err).__name__}. The rest of the page still works."))
        with st.expander("Details for a bug report"):
            st.code("".join(traceback.format_exception(err)), language="text")


def run(what: str, fn: Any, *args: Any, **kwargs: Any) -> Any:
    """Call `fn` inside a status box saying `what`; return its result, or None after showing the error."""
    result = None
    with guarded(what):
        with st.spinner(safe_text(f"{what[0].upper()}{what[1:]}…")):
            result = fn(*args, **kwargs)
    return result


@st.cache_resource(max_entries=16, show_spinner=False,
                   hash_funcs={bytes: lambda b: hashlib.sha256(b).hexdigest()})
def evaluate_input(name: str, allow_pickle: bool, source: str | bytes, methods: tuple[str, ...], method: Method,
                   _progress: Any = None) -> Any:
    """`rollout_core.faithfulness.evaluate.evaluate_input`, cached on model, input, methods and settings
    (`_progress(done, total, what)` is told how far a run is; not part of the cache key)."""
    from rollout_core.faithfulness import evaluate

    options = {k: v for k, v in method.kwargs().items() if k not in ("method", "target")}
    return evaluate.evaluate_input(load(name, allow_pickle), source, list(methods), progress=_progress, **options)


@st.cache_resource(max_entries=8, show_spinner=False)
def evaluate_dataset(name: str, allow_pickle: bool, dataset: str, methods: tuple[str, ...], limit: int,
                     method: Method, _progress: Any = None) -> Any:
    """`rollout_core.faithfulness.evaluate.evaluate_dataset` on a generated set, cached on its arguments."""
    from rollout_core.faithfulness import evaluate

    options = {k: v for k, v in method.kwargs().items() if k not in ("method", "target")}
    return evaluate.evaluate_dataset(load(name, allow_pickle), dataset, list(methods), limit=limit,
                                     progress=_progress, **options)
