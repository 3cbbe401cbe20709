"""Setup step: flow's max-flow kernels (maths.maxflow, numba with `cache=True`) compiled into numba's on-disk cache,
so that no process of the app, the warm server or the CLI compiles them (15 s on this machine); a process then
only loads them (rollout_core.serving.kernels does that at start)."""
from __future__ import annotations

import time


def build(force: bool = False) -> str:
    """Compile (or, when numba's cache holds them, load) the kernels; a one-line status. `force` changes nothing:
    numba recompiles by itself when the source changed."""
    from rollout_core.maths.flow_bounded import warm_up

    start = time.perf_counter()
    warm_up()
    return f"flow kernels: ready in numba's cache ({time.perf_counter() - start:.1f} s)"
