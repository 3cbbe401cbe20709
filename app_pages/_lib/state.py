"""Settings that live in the URL query string, so a view is shareable by link and survives a reload.

Each setting is a widget key in `st.session_state`. On a fresh session the value is read from the URL
(falling back to the default); after the widgets have run, every value that differs from its default is
written back to `st.query_params` and defaults are removed, so links stay short.
"""
from __future__ import annotations

from typing import Any, Callable

import streamlit as st

MAX_URL_TEXT = 1500
"""Longer texts are not put in the URL (browsers and proxies cut long URLs)."""


def _bool(raw: str) -> bool:
    return raw.lower() in ("1", "true", "yes", "on")


def _parser(default: Any) -> Callable[[str], Any]:
    if isinstance(default, bool):
        return _bool
    if isinstance(default, int):
        return int
    if isinstance(default, float):
        return float
    return str


def param(key: str, default: Any, choices: tuple[Any, ...] | None = None) -> Any:
    """Make sure `key` is in session state (from the URL on first use) and return its value."""
    if key not in st.session_state:
        value = default
        raw = st.query_params.get(key)
        if raw is not None:
            try:
                value = _parser(default)(raw)
            except ValueError:
                value = default
            if choices is not None and value not in choices:
                value = default
        st.session_state[key] = value
    _registered()[key] = default
    return st.session_state[key]


def _registered() -> dict[str, Any]:
    """The settings used by this run of this session (kept per session: sessions run in parallel threads)."""
    return st.session_state.setdefault("_url_params", {})


def sync_url() -> None:
    """Write every registered setting that differs from its default into the URL; drop the rest."""
    registered = _registered()
    for key, default in registered.items():
        value = st.session_state.get(key, default)
        text = _format(value)
        if value == default or (isinstance(value, str) and len(value) > MAX_URL_TEXT):
            if key in st.query_params:
                del st.query_params[key]
        elif st.query_params.get(key) != text:
            st.query_params[key] = text
    registered.clear()


def _format(value: Any) -> str:
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)
