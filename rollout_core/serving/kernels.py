"""Flow's compiled kernels made ready when a long-lived process starts (the app, the warm server), in a background
thread, so that the user's first flow costs what later ones do. `python -m rollout_core setup` compiles them into
numba's on-disk cache beforehand (rollout_core.build.kernels); here they are only loaded."""
from __future__ import annotations

import atexit
import sys
import threading

_LOCK = threading.Lock()
_THREAD: threading.Thread | None = None
EXIT_WAIT_SECONDS = 5.0
"""A process ending while the kernels load waits this long for them (a load from numba's cache takes a second or
two): the interpreter's shutdown stops the loading thread in the middle of numba's C++, which the C++ runtime
answers with std::terminate ("terminate called without an active exception", SIGABRT). Short, so that stopping the
app never hangs on a kernel that is still compiling; the warm server's process skips the shutdown instead."""


def start_flow_kernels() -> threading.Thread:
    """Start, once per process, a daemon thread loading flow's kernels (maths.flow_bounded.warm_up); later calls
    return the same thread at once. The caller does not wait: the app calls it after its first page is drawn. The
    process waits for it at exit (at most EXIT_WAIT_SECONDS), so it never exits in the middle of the load."""
    global _THREAD
    with _LOCK:
        if _THREAD is None:
            _THREAD = threading.Thread(target=_warm_up, name="flow-kernels", daemon=True)
            _THREAD.start()
            atexit.register(_THREAD.join, EXIT_WAIT_SECONDS)
        return _THREAD


def _warm_up() -> None:
    from rollout_core.maths.flow_bounded import warm_up

    try:
        warm_up()
    except Exception:  # noqa: BLE001 - a failed warm-up only means the first flow loads the kernels itself
        pass


def flow_kernels_loaded() -> bool:
    """Whether this process holds flow's compiled max-flow kernels (both of maths.maxflow's, for the argument types
    real solves use)."""
    maxflow = sys.modules.get("rollout_core.maths.maxflow")
    return maxflow is not None and all(kernel.signatures for kernel in (maxflow._solve, maxflow._levels))
