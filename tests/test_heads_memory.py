"""Issue 16: every head's attention is kept only while the head panel is open, and a finished session does not
keep explanations alive once the result cache has dropped them (closed tabs' sessions outlive them by minutes)."""
from __future__ import annotations

import gc
import json
from pathlib import Path
from typing import Callable

import numpy as np
import pytest

from rollout_core.explanation import Explanation
from rollout_core.lru import size_of
from test_pages_apptest import assert_clean, page

pytestmark = pytest.mark.slow  # the whole module: see the fast tier in pyproject.toml

TEXT = "the food was cold but the staff were kind"  # within the tiny model's 64 tokens


def _head_bytes(model: Path, n: int) -> int:
    """float64 attention of every layer and head for n tokens, from the model's config (not from the code)."""
    config = json.loads((model / "config.json").read_text())
    return config["num_hidden_layers"] * config["num_attention_heads"] * n * n * 8


def _live() -> list[Explanation]:
    """The explanations of TEXT still in memory (the result cache's and whatever else holds one)."""
    gc.collect()
    return [o for o in gc.get_objects() if isinstance(o, Explanation) and o.text == TEXT]


def test_the_cached_explanation_is_small_without_the_head_panel_and_the_panel_brings_the_heads(
        tiny_model_dir: Callable[[str], Path]) -> None:
    from page_views import chart_count

    model = tiny_model_dir("bert")
    at = page("app_pages/text.py", model=str(model), text=TEXT)
    assert_clean(at)
    (closed,) = _live()
    n = len(closed.tokens)
    assert closed.head_attention is None
    at.session_state["heads_open"] = True
    at.run()
    assert_clean(at)
    assert chart_count(at) == 3  # bars, matrix and the head grid
    (opened,) = [e for e in _live() if e.head_attention is not None]
    config = json.loads((model / "config.json").read_text())
    assert opened.head_attention.shape == (config["num_hidden_layers"], config["num_attention_heads"], n, n)
    np.testing.assert_allclose(opened.head_attention.sum(-1), 1.0, atol=1e-5)  # softmax rows
    assert size_of(opened) - size_of(closed) >= _head_bytes(model, n)  # what the closed panel saves


def test_a_finished_session_holds_no_head_tensors_once_the_cache_dropped_them(
        tiny_model_dir: Callable[[str], Path]) -> None:
    import streamlit as st

    model = tiny_model_dir("bert")
    at = page("app_pages/text.py", model=str(model), text=TEXT)
    assert_clean(at)
    st.cache_resource.clear()  # the result cache with it
    assert all(e.head_attention is None for e in _live())
    assert at.session_state["heads_open"] is False  # the session is still there
