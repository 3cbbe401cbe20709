"""The real app in a subprocess and headless Debian chromium driven by Playwright (sync API)."""
from __future__ import annotations

import sys
from pathlib import Path
from typing import Iterator

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))
from browser_harness import CHROMIUM, CHROMIUM_ARGS, streamlit_server  # noqa: E402


@pytest.fixture(scope="session")
def app_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The real app (`streamlit run app.py`) on a free port, stopped after the session."""
    if not Path(CHROMIUM).exists():
        pytest.skip(f"no chromium at {CHROMIUM}")
    with streamlit_server(ROOT / "app.py", tmp_path_factory.mktemp("app") / "streamlit.log") as url:
        yield url


@pytest.fixture(scope="session")
def browser() -> Iterator[object]:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            yield chromium
        finally:
            chromium.close()
