"""Who is asking: one id per browser, so that a visitor's tabs share one fair share of the server (its heavy-job
slot and its part of the upload store).

The browser's XSRF cookie (`_streamlit_xsrf`, set by Streamlit's server once per browser and sent by every tab)
holds a random token; its digest names the visitor. Without it (XSRF protection off, or a test runtime) the
Streamlit session, one per tab, does.
"""
from __future__ import annotations

import binascii
import hashlib

import streamlit as st

XSRF_COOKIE = "_streamlit_xsrf"


def visitor() -> str:
    """This request's visitor: "browser:<digest>" or "session:<id>" (or "" outside a Streamlit run)."""
    try:
        cookie = st.context.cookies.get(XSRF_COOKIE)
    except Exception:  # no request context (bare mode)
        cookie = None
    token = _token(cookie) if isinstance(cookie, str) and cookie else None  # (a test runtime gives a mock)
    if token:
        return "browser:" + hashlib.sha256(token).hexdigest()[:16]
    from streamlit.runtime.scriptrunner_utils.script_run_context import get_script_run_ctx

    ctx = get_script_run_ctx()
    return f"session:{ctx.session_id}" if ctx is not None else ""


def _token(cookie: str) -> bytes | None:
    """The random token of a tornado XSRF cookie: version 2 is "2|mask|masked token|time" (the mask may change
    between responses, the token does not); version 1 is the token in hex."""
    parts = cookie.split("|")
    try:
        if parts[0] == "2" and len(parts) == 4:
            mask, masked = binascii.a2b_hex(parts[1]), binascii.a2b_hex(parts[2])
            return bytes(b ^ mask[i % len(mask)] for i, b in enumerate(masked)) if mask else None
        return binascii.a2b_hex(cookie)
    except (binascii.Error, ValueError):
        return None
