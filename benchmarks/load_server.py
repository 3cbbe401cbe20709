"""Load test against a real local server (issue 16; not part of the test run or of run_all.py).

Starts `streamlit run app.py` on a free port with a bounded result cache, opens `--texts` distinct ~400-word
texts one after another in headless chromium (each a new page visit, so a new session) and reads the server's
resident memory (/proc/<pid>/status VmRSS) after 1, 10, 25 and the last text. Then opens attention flow on a
further long text (ROLLOUT_MAX_COMPUTE_SECONDS raised so it is allowed), closes the tab after `--flow-seconds`
and samples the server's CPU use (utime + stime from /proc/<pid>/stat) every half second for 10 s: it must fall
back to idle within seconds.

Two visitors (issue 30, `--part visitors`): a light visitor (its own browser context, so its own cookie) opens
rollout on short texts, each a new text, first alone and then while a heavy visitor (another context) runs attention
flow on a long text; the light visitor's time per page, alone and beside the heavy one, and their ratio.

    python benchmarks/load_server.py [--part all|memory|visitors] [--texts 50] [--cache-mb 512] [--flow-seconds 5]
                                     [--light 3] [--port 8650]
"""
from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import time
import urllib.parse
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))
from browser_harness import CHROMIUM, CHROMIUM_ARGS, streamlit_server  # noqa: E402

LOAD_MS = 180_000
WORDS = ("the service food waiter table evening menu price dish taste kitchen friend visit night wine bread soup "
         "garden music window chair manager reservation dessert coffee portion sauce flavour plate staff owner "
         "was were seemed felt looked stayed became remained quite very rather truly hardly never always often "
         "cold warm rude kind slow quick bland rich fresh stale noisy quiet clean dirty cheap expensive "
         "and but so while because although then later after before").split()
CHECKPOINTS = (1, 10, 25, 50)
IDLE_CPU = 0.05  # a core fraction under which the server counts as idle


def long_text(seed: int, words: int = 400) -> str:
    """A distinct text of `words` words (seeded: the same seed gives the same text)."""
    rng = random.Random(seed)
    return f"Visit {seed}: " + " ".join(rng.choice(WORDS) for _ in range(words)) + "."


def server_pid(port: int) -> int:
    """The pid of the `streamlit run ... --server.port port` process (scanned from /proc)."""
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                args = (entry / "cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if b"streamlit" in b" ".join(args) and str(port).encode() in args:
                return int(entry.name)
    raise RuntimeError(f"no streamlit process on port {port}")


def rss_mb(pid: int) -> float:
    """Resident memory of `pid` in MB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError("no VmRSS")


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds `pid` has used so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _wait_done(page: object) -> None:
    page.wait_for_selector(".token-highlight", timeout=LOAD_MS)
    page.wait_for_function("() => !document.querySelector('[data-testid=\"stStatusWidget\"] button') && "
                           "!document.querySelector('[data-testid=\"stStatusWidget\"]')?.innerText.includes('Running')",
                           timeout=LOAD_MS)


def light_visit(page: object, url: str, seed: int) -> float:
    """Seconds from opening rollout on a new short text until the page is drawn and idle."""
    text = urllib.parse.quote(long_text(seed, words=12))
    start = time.monotonic()
    page.goto(f"{url}/text?model=default-text&method=rollout&text={text}", timeout=LOAD_MS)
    _wait_done(page)
    return time.monotonic() - start


def two_visitors(browser: object, url: str, pid: int, light: int) -> None:
    """The light visitor's page times alone, then beside a heavy visitor's attention flow (see the docstring)."""
    light_visitor, heavy_visitor = browser.new_context(), browser.new_context()
    try:
        page = light_visitor.new_page()
        light_visit(page, url, 500)  # the first visit loads the model; not counted
        alone = [light_visit(page, url, 501 + i) for i in range(light)]
        heavy = heavy_visitor.new_page()
        heavy.goto(f"{url}/text?model=default-text&method=flow&text={urllib.parse.quote(long_text(20_000))}",
                   timeout=LOAD_MS)
        heavy.wait_for_function("() => document.body.innerText.includes('computing flow')", timeout=LOAD_MS)
        time.sleep(2)
        before, at = cpu_seconds(pid), time.monotonic()
        beside = [light_visit(page, url, 601 + i) for i in range(light)]
        busy = (cpu_seconds(pid) - before) / (time.monotonic() - at)
        still = heavy.evaluate("() => document.body.innerText.includes('computing flow')")
        waited = page.evaluate("() => document.body.innerText.includes('Waiting for a free slot')")
        print(f"light visitor alone: {', '.join(f'{t:.1f}' for t in alone)} s per page "
              f"(median {statistics.median(alone):.1f})", flush=True)
        print(f"light visitor beside the heavy one: {', '.join(f'{t:.1f}' for t in beside)} s per page "
              f"(median {statistics.median(beside):.1f}); server {busy:.2f} cores meanwhile; heavy still computing "
              f"at the end: {still}; light told to wait for a slot: {waited}", flush=True)
        print(f"light visitor's time beside / alone: {statistics.median(beside) / statistics.median(alone):.2f}x",
              flush=True)
    finally:
        heavy_visitor.close()  # stops the flow
        light_visitor.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--part", choices=("all", "memory", "visitors"), default="all",
                        help="memory: the texts and the closed flow; visitors: the two-visitor run")
    parser.add_argument("--texts", type=int, default=50)
    parser.add_argument("--cache-mb", type=float, default=512)
    parser.add_argument("--flow-seconds", type=float, default=5.0)
    parser.add_argument("--light", type=int, default=3, help="light pages timed alone and beside the heavy one")
    parser.add_argument("--port", type=int, default=None, help="the server's port (default: a free one)")
    args = parser.parse_args()
    from playwright.sync_api import sync_playwright

    os.environ.update(ROLLOUT_RESULT_CACHE_MB=str(args.cache_mb), ROLLOUT_MAX_COMPUTE_SECONDS="100000")
    log = Path("/tmp") / f"load_server_{os.getpid()}.log"
    with streamlit_server(HERE.parent / "app.py", log, port=args.port) as url, sync_playwright() as playwright:
        pid = server_pid(int(url.rsplit(":", 1)[1]))
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        print(f"server pid {pid}, cache bound {args.cache_mb:g} MB, RSS at start {rss_mb(pid):.0f} MB; load "
              f"{os.getloadavg()[0]:.2f}", flush=True)
        if args.part in ("all", "visitors"):
            two_visitors(browser, url, pid, args.light)
        if args.part == "visitors":
            browser.close()
            print(f"load {os.getloadavg()[0]:.2f} at the end; server log {log}")
            return 0
        page = browser.new_page()
        started = time.monotonic()
        for index in range(1, args.texts + 1):
            text = urllib.parse.quote(long_text(index))
            page.goto(f"{url}/text?model=default-text&text={text}", timeout=LOAD_MS)
            _wait_done(page)
            if index in CHECKPOINTS or index == args.texts:
                print(f"after {index:3d} texts: RSS {rss_mb(pid):7.0f} MB  ({time.monotonic() - started:.0f} s)",
                      flush=True)
        page.close()
        time.sleep(3)
        before = cpu_seconds(pid)
        time.sleep(2)
        print(f"idle before flow: {(cpu_seconds(pid) - before) / 2:.2f} cores", flush=True)
        flow = browser.new_page()
        flow.goto(f"{url}/text?model=default-text&method=flow&text={urllib.parse.quote(long_text(10_000))}",
                  timeout=LOAD_MS)
        time.sleep(args.flow_seconds)
        before, at = cpu_seconds(pid), time.monotonic()
        time.sleep(1)
        busy = (cpu_seconds(pid) - before) / (time.monotonic() - at)
        status = flow.evaluate("() => document.querySelector('[data-testid=\"stStatusWidget\"]')?.innerText || ''")
        errors = flow.get_by_test_id("stAlertContentError").all_inner_texts()
        flow.close()
        closed = time.monotonic()
        print(f"flow running ({args.flow_seconds:g} s after opening; status widget {status.strip()!r}, "
              f"errors {errors}): {busy:.2f} cores; tab closed", flush=True)
        samples, last, previous = [], closed, cpu_seconds(pid)
        while time.monotonic() - closed < 10:
            time.sleep(0.5)
            now, used = time.monotonic(), cpu_seconds(pid)
            samples.append((now - closed, (used - previous) / (now - last)))
            last, previous = now, used
        browser.close()
        idle_at = next((t for i, (t, _) in enumerate(samples) if all(c < IDLE_CPU for _, c in samples[i:])), None)
        print("CPU after closing (s: cores): " + ", ".join(f"{t:.1f}: {c:.2f}" for t, c in samples))
        print(f"idle (< {IDLE_CPU} cores for the rest of the 10 s) from {idle_at:.1f} s after closing"
              if idle_at is not None else "NOT idle within 10 s of closing", flush=True)
        print(f"final RSS {rss_mb(pid):.0f} MB; server log {log}")
        return 0 if idle_at is not None else 1


if __name__ == "__main__":
    sys.exit(main())
