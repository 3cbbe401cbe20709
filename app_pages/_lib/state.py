"""Settings that live in the URL query string, so a view is shareable by link and survives a reload.

Each setting is a widget key in `st.session_state`. On a fresh session the value is read from the URL
(falling back to the default); after the widgets have run, every value that differs from its default is
written back to `st.query_params` and defaults are removed, so links stay short.
"""
from __future__ import annotations

import math
from typing import Any, Callable

import streamlit as st

from app_pages._lib.safe import safe_text

MAX_URL_TEXT = 1500
"""Longer texts are not put in the URL (browsers and proxies cut long URLs)."""


def _bool(raw: str) -> bool:
    return raw.lower() in ("1", "true", "yes", "on")


def _parser(default: Any) -> Callable[[str], Any]:
    if isinstance(default, bool):
        return _bool
    if isinstance(default, int):
        return _integer
    if isinstance(default, float):
        return _finite
    return str


def _finite(raw: str) -> float:
    value = float(raw)
    if not math.isfinite(value):
        raise ValueError(f"{raw!r} is not a finite number")
    return value


def _integer(raw: str) -> int:
    value = _finite(raw)
    if value != int(value):
        raise ValueError(f"{raw!r} is not a whole number")
    return int(value)


def param(key: str, default: Any, choices: tuple[Any, ...] | None = None, *, low: float | None = None,
          high: float | None = None, from_url: bool = True) -> Any:
    """Make sure `key` is in session state (from the URL on first use) and return its value.

    Numbers from the URL are clamped to [`low`, `high`]; unreadable ones (text, inf, nan) give the default; both
    with a visible note. `from_url=False` is for settings that lower safety (the pickle opt-in): never read from
    a link, never written to one."""
    if not from_url:
        if key in st.query_params:
            del st.query_params[key]
        return st.session_state.setdefault(key, default)
    if key not in st.session_state:
        value = default
        raw = st.query_params.get(key)
        if raw is not None:
            value = _from_url(key, raw, default, choices, low, high)
        st.session_state[key] = value
    _registered()[key] = default
    return st.session_state[key]


def _from_url(key: str, raw: str, default: Any, choices: tuple[Any, ...] | None, low: float | None,
              high: float | None) -> Any:
    """The URL's value of `key`, or the default / nearest allowed value with a note saying so."""
    try:
        value = _parser(default)(raw)
    except (ValueError, OverflowError):
        _note(f"The link's {key}={raw[:40]} is not a usable value; {default} is used instead.")
        return default
    if choices is not None and value not in choices:
        _note(f"The link's {key}={raw[:40]} is not one of the choices; {default} is used instead.")
        return default
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        clamped = min(max(value, low if low is not None else value), high if high is not None else value)
        if clamped != value:
            _note(f"The link's {key}={raw[:40]} is outside its range ({low} to {high}); {clamped} is used instead.")
            value = type(default)(clamped)
    return value


def _note(message: str) -> None:
    """Show a note about a URL setting that was not taken as given (plain text: the URL is a stranger's)."""
    st.warning(safe_text(message))


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
