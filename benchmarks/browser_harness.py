"""Driving a Streamlit app in headless Debian chromium, shared by tests/browser and benchmarks/bench_slider.py.

`streamlit_server` runs `streamlit run` in a subprocess on a free port; `time_slider_moves` presses arrow keys
on a layer slider and times, per move, key press -> the token highlight carries the new layer's marker
(data-view="layer-k-cum") and a Plotly title says "up to layer k of".
"""
from __future__ import annotations

import contextlib
import os
import socket
import statistics
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any, Iterator

ROOT = Path(__file__).resolve().parents[1]
START_TIMEOUT = 90
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
                 "--disable-sync", "--no-first-run"]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@contextlib.contextmanager
def streamlit_server(script: Path, log_path: Path, cwd: Path = ROOT, port: int | None = None) -> Iterator[str]:
    """Start `streamlit run script` (offline, one thread per op) on `port` (default: a free one), wait until it
    answers, yield its URL, and always stop it afterwards. The repository root is on PYTHONPATH so scripts
    outside it import the code."""
    port = port or free_port()
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1",
           "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    with log_path.open("w") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "streamlit", "run", str(script), "--server.port", str(port),
             "--server.headless", "true", "--server.fileWatcherType", "none", "--browser.gatherUsageStats", "false"],
            cwd=cwd, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
        )
        url = f"http://127.0.0.1:{port}"
        try:
            deadline = time.monotonic() + START_TIMEOUT
            while True:
                if proc.poll() is not None:
                    raise RuntimeError(f"streamlit exited with {proc.returncode}; see {log_path}")
                try:
                    with urllib.request.urlopen(f"{url}/_stcore/health", timeout=2) as response:
                        if response.status == 200:
                            break
                except OSError:
                    pass
                if time.monotonic() > deadline:
                    raise RuntimeError(f"streamlit did not answer within {START_TIMEOUT} s; see {log_path}")
                time.sleep(0.5)
            yield url
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=10)


SLIDER = 'input[type=range][aria-label="Layer (cumulative rollout up to this layer)"]'
SHOWN = ("k => document.querySelector(`.token-highlight[data-view='layer-${k}-cum']`) && "
         "[...document.querySelectorAll('.gtitle')].some(t => t.textContent.includes(`up to layer ${k} of`))")


def time_slider_moves(page: Any, moves: int, timeout_ms: int = 30_000) -> list[float]:
    """Milliseconds per move for `moves` moves, bouncing between layer 1 and the top (starting at the top)."""
    slider = page.locator(SLIDER)
    top = int(slider.get_attribute("max"))
    if top < 2:
        raise ValueError("the slider has a single layer: nothing to move")
    slider.focus()
    layer, direction, times = top, -1, []
    for _ in range(moves):
        if not 1 <= layer + direction <= top:
            direction = -direction
        layer += direction
        start = time.perf_counter()
        slider.press("ArrowLeft" if direction < 0 else "ArrowRight")
        page.wait_for_function(SHOWN, arg=layer, timeout=timeout_ms, polling="raf")
        times.append((time.perf_counter() - start) * 1000)
    return times


def timing_summary(times: list[float]) -> dict[str, Any]:
    """Median, 95th percentile (nearest rank), max and every time, in ms rounded to 0.1."""
    ordered = sorted(times)
    return {"moves": len(times), "median_ms": round(statistics.median(times), 1),
            "p95_ms": round(ordered[max(0, int(round(0.95 * len(ordered))) - 1)], 1),
            "max_ms": round(ordered[-1], 1), "all_ms": [round(t, 1) for t in times]}
