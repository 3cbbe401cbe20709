"""Issue 16, item 6, in a real browser: Markdown from a link's `target`, `model` or `labels` ([text](url) or
![](url)) shows as literal characters: the page has no anchor or image pointing at the stranger's host, and
chromium makes no request to it (every request of the tab is recorded; any to that host is also aborted)."""
from __future__ import annotations

import urllib.parse
from pathlib import Path
from typing import Any, Callable

import pytest

pytestmark = pytest.mark.browser

LOAD = 120_000  # ms: a cold model load in a busy process
EVIL = "evil.example"
PAYLOADS = {"link": f"[Session expired](http://{EVIL}/)", "image": f"![](http://{EVIL}/pixel.png)"}


def _host(url: str) -> str | None:
    return urllib.parse.urlsplit(url).hostname


def _queries(field: str, payload: str, tiny_model_dir: Callable[[str], Path]) -> dict[str, str]:
    if field == "target":
        return {"model": str(tiny_model_dir("bert")), "text": "a good film", "method": "gradient", "target": payload}
    if field == "model":
        return {"model": payload}
    return {"model": str(tiny_model_dir("sentence")), "text": "a good film", "labels": f"{payload}, other"}


@pytest.mark.parametrize("kind", sorted(PAYLOADS))
# labels: the tiny model never shows them (the AppTest sweep covers labels)
@pytest.mark.parametrize("field", ["target", "model"])
def test_a_link_s_markdown_makes_no_anchor_and_no_request(field: str, kind: str, app_url: str, browser: Any,
                                                         tiny_model_dir: Callable[[str], Path]) -> None:
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    requested: list[str] = []
    context.on("request", lambda request: requested.append(request.url))
    context.route(f"**://{EVIL}/**", lambda route: route.abort())
    tab = context.new_page()
    try:
        query = urllib.parse.urlencode(_queries(field, PAYLOADS[kind], tiny_model_dir))
        tab.goto(f"{app_url}/text?{query}", timeout=LOAD)
        # the payload reached the page (else nothing is tested): its host is shown as text somewhere
        try:
            tab.wait_for_function(f"() => document.body.innerText.includes('{EVIL}')", timeout=LOAD)
        except Exception as err:  # say what the page shows instead
            pytest.fail(f"the payload never showed ({err}); the page says: {tab.inner_text('body')[-600:]}")
        tab.wait_for_function("() => !document.querySelector('[data-testid=\"stStatusWidget\"] button') && "
                              "!document.querySelector('[data-testid=\"stStatusWidget\"]')?.innerText"
                              ".includes('Running')", timeout=LOAD)
        tab.wait_for_timeout(1000)  # time for a remote image to be asked for, were there one
        pointed = tab.evaluate("() => [...document.querySelectorAll('a[href], [src]')].map(e => e.href || e.src)")
        assert [url for url in pointed if _host(url) == EVIL] == []
        assert [url for url in requested if _host(url) == EVIL] == []
        assert any(url.startswith(app_url) for url in requested)  # the recorder saw the page's own requests
    finally:
        context.close()
