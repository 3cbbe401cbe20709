"""The real app in a subprocess and headless Debian chromium driven by Playwright (sync API)."""
from __future__ import annotations

import sys
from pathlib import Path
from dataclasses import dataclass, field
from typing import Any, Iterator

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))
from browser_harness import CHROMIUM, CHROMIUM_ARGS, streamlit_server  # noqa: E402


BROWSER_TIMEOUT = 600
"""Seconds a browser test may take (pytest-timeout; the default is 300): it waits for a page up to 2 min at a time."""


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if item.get_closest_marker("browser") and not item.get_closest_marker("timeout"):
            item.add_marker(pytest.mark.timeout(BROWSER_TIMEOUT))


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


@dataclass
class OfflineTab:
    """A tab whose context lets only file:// requests through: `requests` every URL asked for, `errors` the page's
    uncaught errors and console errors."""

    tab: Any
    requests: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)


@pytest.fixture
def offline_tab(browser: Any) -> Iterator[OfflineTab]:
    """A fresh context (1200 x 900) refusing every request that is not a file: for pages opened from disk."""
    context = browser.new_context(viewport={"width": 1200, "height": 900})
    tab = context.new_page()
    offline = OfflineTab(tab)

    def refuse(route: Any) -> None:
        offline.requests.append(route.request.url)
        route.continue_() if route.request.url.startswith("file:") else route.abort()

    context.route("**/*", refuse)
    tab.on("pageerror", lambda err: offline.errors.append(str(err)))
    tab.on("console", lambda message: offline.errors.append(message.text) if message.type == "error" else None)
    try:
        yield offline
    finally:
        context.close()
