"""Hooks that act only on the thread that installed them.

The dashboard shares one loaded model between sessions, each on its own thread. A hook that records (value norms,
contribution states) or rewrites outputs (value zeroing, LRP rules) must not see or change another session's
forward pass of the same model, so every temporary hook is wrapped with `own_thread`.
"""
from __future__ import annotations

import threading
from typing import Any, Callable


def own_thread(hook: Callable[..., Any]) -> Callable[..., Any]:
    """`hook`, called only on forward passes of the thread that wraps it (others see a no-op: None)."""
    owner = threading.get_ident()

    def guarded(*args: Any, **kwargs: Any) -> Any:
        return hook(*args, **kwargs) if threading.get_ident() == owner else None

    return guarded
