"""Issue 16: the server's memory stays flat under a stream of visitors. A closed tab's session is kept for
server.disconnectedSessionTTL (120 s by default, for a reconnect), with its fragments' arguments and its download
buttons' makers; those must not keep explanations alive once the result cache has dropped them, or the server
holds one explanation per visitor of the last two minutes on top of the cache's bound. Runs app.py's pages in a
real in-process Streamlit runtime (tests/streamlit_runtime.py), with a result cache too small to keep anything."""
from __future__ import annotations

import asyncio
import concurrent.futures
import gc
from pathlib import Path
from typing import Callable, Iterator

import pytest

from rollout_core.explanation import Explanation
from streamlit_runtime import runtime, visit

pytestmark = pytest.mark.slow  # the whole module: see the fast tier in pyproject.toml

VISITS = 3
TEXTS = [f"visitor {i} found the soup cold but the staff kind" for i in range(VISITS)]
EXAMPLES = ["astronaut", "chelsea", "coffee"][:VISITS]


def _live(before: frozenset[int] = frozenset()) -> list[Explanation]:
    """Explanations alive now, other than those in `before` (ids alive before the visits: other tests' fixtures
    may keep their own explanations for the whole run)."""
    gc.collect()
    return [o for o in gc.get_objects() if isinstance(o, Explanation) and id(o) not in before]


@pytest.fixture()
def uncached(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """A result cache too small to keep any explanation: whatever stays alive is held by something else."""
    import streamlit as st

    monkeypatch.setenv("ROLLOUT_RESULT_CACHE_MB", "0.001")
    st.cache_resource.clear()
    yield
    st.cache_resource.clear()


def _closed_visits(page: str, queries: list[dict[str, str]]) -> tuple[int, int]:
    """Open `page` once per query, each in a new session closed after its run (stored for a reconnect): the
    number of sessions still stored, and of explanations alive."""

    async def scenario() -> tuple[int, int]:
        async with runtime(session_ttl=600) as rt:
            ids = [await visit(rt, page, **query) for query in queries]
            stored = sum(rt._session_mgr.get_session_info(i) is not None for i in ids)
            return stored, len(_live(before))

    before = frozenset(map(id, _live()))
    # on a thread of its own: in the full suite Playwright's sync API leaves an event loop running in this one
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, scenario()).result()


def test_closed_text_sessions_hold_no_explanation(tiny_model_dir: Callable[[str], Path], uncached: None) -> None:
    model = str(tiny_model_dir("bert"))
    stored, live = _closed_visits("text", [dict(model=model, text=text) for text in TEXTS])
    assert (stored, live) == (VISITS, 0)


def test_closed_text_sessions_with_the_head_panel_open_hold_no_explanation(
        tiny_model_dir: Callable[[str], Path], uncached: None) -> None:
    model = str(tiny_model_dir("bert"))
    stored, live = _closed_visits("text", [dict(model=model, text=text, heads_open="1") for text in TEXTS])
    assert (stored, live) == (VISITS, 0)


def test_closed_image_sessions_hold_no_explanation(tiny_model_dir: Callable[[str], Path], uncached: None) -> None:
    model = str(tiny_model_dir("vit"))
    stored, live = _closed_visits("image", [dict(model=model, example=name) for name in EXAMPLES])
    assert (stored, live) == (VISITS, 0)


def test_closed_compare_sessions_hold_no_explanation(tiny_model_dir: Callable[[str], Path], uncached: None) -> None:
    model = str(tiny_model_dir("bert"))
    stored, live = _closed_visits("compare", [dict(model=model, text=text, modality="text") for text in TEXTS])
    assert (stored, live) == (VISITS, 0)
