"""Issue 16, the compute budget: a heavy job started from a page stops when its browser tab is closed.

Attention flow on a 254-token text through the 12 layers of a tiny BERT (tests/tiny_models.py "bert-long": about
10 s of max-flow problems at load 3 on the compiled solver, about 9 s by the budget's estimate) runs in a real
in-process Streamlit runtime (tests/streamlit_runtime.py). The tab is closed while the flow is solving, and within
seconds the job must be seen to stop: a checkpoint raised `Cancelled`, no max-flow problem is solved after that, the
job's heavy slot is free again and the session's script thread has ended. The job's own state is observed, not
CPU use: the machine is shared with other processes. (Streamlit 1.67 asks a closed tab's script to stop; the
page's stop check also notices a session that is no longer active.)"""
from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from pathlib import Path
from typing import Callable, Iterator

import pytest
import streamlit as st

from rollout_core import cancel
from rollout_core.maths import flow
from rollout_core.methods._spec import Workload
from rollout_core.serving import budget
from streamlit_runtime import RUN_SECONDS, open_tab, runtime, wait_for

pytestmark = pytest.mark.slow  # the whole module: see the fast tier in pyproject.toml

STOP_SECONDS = 10.0
"""How long a closed tab's flow may go on: one max-flow problem takes milliseconds, so this is slack for load."""
TEXT = " ".join(["the cat sat on the mat"] * 42)  # 252 words of the tiny vocabulary: 254 tokens


class FlowWatch:
    """Stands in for the flow's `checkpoint`: counts the max-flow problems begun and notes a cancellation."""

    def __init__(self) -> None:
        self.solved = 0
        self.cancelled = False

    def checkpoint(self) -> None:
        """`cancel.checkpoint`, counted; remembers when it raised `Cancelled`."""
        self.solved += 1
        try:
            cancel.checkpoint()
        except cancel.Cancelled:
            self.cancelled = True
            raise


def _script_threads() -> int:
    """Streamlit script runs going on in this process."""
    return sum(t.name == "ScriptRunner.scriptThread" and t.is_alive() for t in threading.enumerate())


@pytest.fixture()
def watched_flow(monkeypatch: pytest.MonkeyPatch) -> Iterator[FlowWatch]:
    """Flows allowed at any estimated cost, their checkpoints watched; page caches fresh before and after."""
    watch = FlowWatch()
    monkeypatch.setenv("ROLLOUT_MAX_COMPUTE_SECONDS", "1e9")
    monkeypatch.setattr(flow, "checkpoint", watch.checkpoint)
    st.cache_resource.clear()
    yield watch
    st.cache_resource.clear()


def test_closing_the_tab_stops_its_flow_within_seconds(tiny_model_dir: Callable[[str], Path],
                                                       watched_flow: FlowWatch) -> None:
    model = str(tiny_model_dir("bert-long"))
    long_flow = Workload(tokens=254, layers=12, model_layers=12, heads=2, hidden=32)
    assert budget.estimate_seconds("flow", long_flow) > 5, "the flow must still be solving when the tab is closed"
    slots = budget._queue()
    jobs, runs = slots.running, _script_threads()  # before: nothing of this test's

    async def scenario() -> tuple[float, int, int]:
        async with runtime(session_ttl=600) as rt:
            session_id, _ = open_tab(rt, "text", model=model, method="flow", text=TEXT)
            await wait_for(lambda: watched_flow.solved > 0, RUN_SECONDS, "the flow starting")
            assert slots.running == jobs + 1 and not watched_flow.cancelled, "a heavy job holds a slot while it runs"
            rt.disconnect_session(session_id)  # the tab is closed; the session is kept for a reconnect
            took = await wait_for(lambda: (watched_flow.cancelled and slots.running == jobs
                                           and _script_threads() == runs), STOP_SECONDS,
                                  "the flow of a closed tab stopping")
            stopped_at = watched_flow.solved
            await asyncio.sleep(1.0)
            return took, stopped_at, watched_flow.solved

    # on a thread of its own: in the full suite Playwright's sync API leaves an event loop running in this one
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        took, stopped_at, a_second_later = pool.submit(asyncio.run, scenario()).result()
    assert took < STOP_SECONDS and a_second_later == stopped_at, (took, stopped_at, a_second_later)
