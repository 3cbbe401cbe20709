"""Layer-slider move -> the new layer shown, in headless chromium: ours vs a server round trip per move.

Ours is the real app's text page (every slider position drawn once and switched in the browser,
rollout_core/figures/layer_explorer.js); the reference is the same view drawn by the server on each move
(benchmarks/slider_round_trip_app.py: st.slider in a fragment, as the page did before). Both on
default-text with the same sentence, measured one after the other in this run by the browser test's own
timer (benchmarks/browser_harness.py). Needs `python -m rollout_core setup` and /usr/bin/chromium.
Run: python benchmarks/bench_slider.py [--moves 20]
"""
from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

from browser_harness import CHROMIUM, CHROMIUM_ARGS, ROOT, streamlit_server, time_slider_moves, timing_summary

sys.path.insert(0, str(ROOT))

TEXT = "The food was cold and the waiter was rude."
LOAD_MS = 180_000


def measure(script: Path, path: str, moves: int, browser, workdir: Path) -> dict:
    with streamlit_server(script, workdir / f"{script.stem}.log") as url:
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        page.goto(f"{url}{path}", timeout=LOAD_MS)
        page.wait_for_selector(".token-highlight", timeout=LOAD_MS)
        page.wait_for_function("() => document.querySelectorAll('.gtitle').length > 0", timeout=LOAD_MS)
        page.wait_for_timeout(1000)  # let the first run settle
        result = timing_summary(time_slider_moves(page, moves))
        page.close()
        return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--moves", type=int, default=20)
    args = parser.parse_args()
    from rollout_core.models import registry

    if not Path(CHROMIUM).exists() or not registry.is_available(registry.lookup("default-text")):
        print(f"skipped: needs {CHROMIUM} and default-text ({registry.SETUP_HINT})", file=sys.stderr)
        return 1
    from playwright.sync_api import sync_playwright

    text = TEXT.replace(" ", "+")
    with tempfile.TemporaryDirectory() as tmp, sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        ours = measure(ROOT / "app.py", f"/text?model=default-text&text={text}", args.moves, browser, Path(tmp))
        reference = measure(ROOT / "benchmarks" / "slider_round_trip_app.py", "/", args.moves, browser, Path(tmp))
        browser.close()
    print(f"slider move -> new layer shown, {args.moves} moves, default-text, headless chromium")
    print(f"{'':32} {'median ms':>10} {'p95 ms':>8} {'max ms':>8}")
    for name, r in (("ours (switched in the browser)", ours), ("server round trip per move", reference)):
        print(f"{name:32} {r['median_ms']:>10} {r['p95_ms']:>8} {r['max_ms']:>8}")
    print(f"ratio round trip / ours: median {reference['median_ms'] / ours['median_ms']:.1f}x, "
          f"p95 {reference['p95_ms'] / ours['p95_ms']:.1f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
