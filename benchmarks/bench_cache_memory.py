"""Server memory under a stream of distinct long texts, with and without the byte bound of the result cache.

Each mode runs in a fresh subprocess: N Streamlit sessions (AppTest, in one process like one server) each open
the text page with the default text model and a different ~400-word text; after every session the resident
memory (VmRSS) and the peak (VmHWM) are read from /proc/self/status, and the cache's total bytes are printed.
"unbounded" sets ROLLOUT_RESULT_CACHE_MB far above what N explanations need (what the count-bounded caches
did before: 64 explanations, 32 payloads); "bounded" sets it to --bound-mb.

Children run with MALLOC_MMAP_THRESHOLD_=1048576 (as bench_memory.py: blocks of 1 MiB or more are returned to
the system when freed, so RSS shows what is held, not what glibc keeps); --default-malloc turns that off.

Run: python benchmarks/bench_cache_memory.py [--sessions 12] [--bound-mb 200]   (a few minutes: not a test)
"""
from __future__ import annotations

import argparse
import gc
import json
import os
import random
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _status_mb(field: str) -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1024
    return float("nan")


def child(sessions: int) -> None:
    """Open `sessions` text pages with distinct long texts; print one JSON line per session."""
    sys.path.insert(0, str(ROOT))
    from streamlit.testing.v1 import AppTest

    from app_pages._lib import core
    from rollout_core.data.sentiment import EXAMPLE_SENTENCES

    words = " ".join(EXAMPLE_SENTENCES).split()
    print(json.dumps({"session": 0, "rss_mb": _status_mb("VmRSS"), "peak_mb": _status_mb("VmHWM")}), flush=True)
    for i in range(1, sessions + 1):
        text = f"text {i}: " + " ".join(random.Random(f"text {i}").choice(words) for _ in range(400))
        start = time.perf_counter()
        at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=300)
        at.query_params["model"] = "default-text"
        at.query_params["text"] = text
        at.switch_page("app_pages/text.py").run()
        errors = [e.value for e in at.error] + [str(e.value) for e in at.exception]
        del at  # the session ends: nothing of it is kept but the shared caches
        gc.collect()
        print(json.dumps({"session": i, "seconds": round(time.perf_counter() - start, 1),
                          "rss_mb": round(_status_mb("VmRSS")), "peak_mb": round(_status_mb("VmHWM")),
                          "cache_mb": round(core.results().total_bytes / 2**20), "errors": errors[:1]}), flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=12)
    parser.add_argument("--bound-mb", type=float, default=200)
    parser.add_argument("--default-malloc", action="store_true",
                        help="keep glibc's growing mmap threshold (freed blocks stay in RSS; see bench_memory.py)")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.sessions)
        return
    for mode, bound in (("unbounded", 1e6), ("bounded", args.bound_mb)):
        env = dict(os.environ, ROLLOUT_RESULT_CACHE_MB=f"{bound:g}", PYTHONPATH=str(ROOT))
        if not args.default_malloc:
            env["MALLOC_MMAP_THRESHOLD_"] = "1048576"
        print(f"## {mode}: ROLLOUT_RESULT_CACHE_MB={bound:g}, {args.sessions} sessions", flush=True)
        out = subprocess.run([sys.executable, __file__, "--child", "--sessions", str(args.sessions)], env=env,
                             cwd=ROOT, capture_output=True, text=True, check=False)
        rows = [json.loads(line) for line in out.stdout.splitlines() if line.startswith("{")]
        for row in rows:
            print(row, flush=True)
        if out.returncode:
            print(out.stderr[-2000:], flush=True)


if __name__ == "__main__":
    main()
