"""Issue 16: a request's cost is estimated before it runs and refused above the limit with a cheaper choice; at most
ROLLOUT_MAX_HEAVY_JOBS heavy computations at once; a flow stops at its next checkpoint once asked to."""
from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Callable

import pytest
import torch
from streamlit.testing.v1 import AppTest

from rollout_core import budget
from rollout_core.budget import BudgetError, Cancelled
from rollout_core.maths.flow import attention_flow
from rollout_core.models.loading import load_model

APP = str(Path(__file__).resolve().parents[1] / "app.py")


def test_the_flow_estimate_matches_the_measured_times_of_the_issue():
    # default text model, 6 layers: 62 tokens 4.6 s, 122 tokens 36 s, 242 tokens over 200 s (issue 16)
    assert budget.estimate_seconds("flow", 62, 6) == pytest.approx(4.6, rel=0.1)
    assert budget.estimate_seconds("flow", 122, 6) == pytest.approx(36, rel=0.1)
    assert budget.estimate_seconds("flow", 242, 6) > 200
    assert budget.estimate_seconds("rollout", 512, 24) == 0.0
    # doubling the tokens costs 8x (cubic), doubling the layers 2x
    assert budget.estimate_seconds("flow", 200, 6) == pytest.approx(8 * budget.estimate_seconds("flow", 100, 6))
    assert budget.estimate_seconds("flow", 100, 12) == pytest.approx(2 * budget.estimate_seconds("flow", 100, 6))


def test_over_the_limit_is_refused_with_the_estimate_and_a_cheaper_choice(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("ROLLOUT_MAX_COMPUTE_SECONDS", "60")
    assert budget.check("flow", 62, 6) == pytest.approx(4.6, rel=0.1)
    with pytest.raises(BudgetError) as err:
        budget.check("flow", 242, 6)
    message = str(err.value)
    assert "flow on 242 tokens" in message and "about 5 min" in message and "use rollout" in message
    # the suggested length fits: 3.2e-6 * 6 * n^3 <= 60 for n <= 146 (by hand)
    fits = int(message.split("shorten the text to about ")[1].split()[0])
    assert 0.8 * 146 <= fits <= 146


def test_durations_in_words():
    assert [budget.in_words(s) for s in (0.2, 45, 272, 2700, 9000)] == \
        ["about 1 s", "about 45 s", "about 5 min", "about 45 min", "about 2.5 h"]


def test_a_request_is_counted_in_the_model_s_tokens(tiny_model_dir: Callable[[str], Path],
                                                    monkeypatch: pytest.MonkeyPatch):
    handle = load_model(tiny_model_dir("bert"))
    monkeypatch.setenv("ROLLOUT_MAX_COMPUTE_SECONDS", "1e-9")
    assert budget.check_request(handle, "the cat sat", "rollout") == 0.0
    with pytest.raises(BudgetError, match=rf"flow on 5 tokens through {handle.num_layers} layers"):
        budget.check_request(handle, "the cat sat", "flow")  # [CLS] the cat sat [SEP]


def test_at_most_k_heavy_jobs_at_once(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("ROLLOUT_MAX_HEAVY_JOBS", "1")
    inside, release = threading.Event(), threading.Event()

    def hold() -> None:
        with budget.heavy_slot():
            inside.set()
            release.wait(5)

    holder = threading.Thread(target=hold)
    holder.start()
    inside.wait(5)
    waited: list[bool] = []
    with pytest.raises(BudgetError, match="busy"):
        with budget.heavy_slot(wait=0.1, on_wait=lambda ahead: waited.append(True)):
            pass
    assert waited == [True]
    release.set()
    holder.join()
    with budget.heavy_slot(wait=0.1):  # free again
        pass


def test_waiting_jobs_are_told_their_place_and_served_in_order(monkeypatch: pytest.MonkeyPatch):
    """One slot, held; three waiters queue up one after another. Each is told how many are queued before it
    (0, 1, 2), then, as the slot passes down the line, its place moves up; they run in arrival order."""
    monkeypatch.setenv("ROLLOUT_MAX_HEAVY_JOBS", "1")
    monkeypatch.setattr(budget, "_QUEUES", {})
    release = {name: threading.Event() for name in ("holder", "a", "b", "c")}
    inside = {name: threading.Event() for name in release}
    places: dict[str, list[int]] = {name: [] for name in release}
    told = {name: threading.Event() for name in release}
    order: list[str] = []

    def job(name: str) -> None:
        def on_wait(ahead: int) -> None:
            places[name].append(ahead)
            told[name].set()

        with budget.heavy_slot(wait=10, on_wait=on_wait):
            order.append(name)
            inside[name].set()
            release[name].wait(10)

    threads = {name: threading.Thread(target=job, args=(name,)) for name in release}
    threads["holder"].start()
    assert inside["holder"].wait(5)
    for name in ("a", "b", "c"):  # queue up one by one, so the arrival order is known
        threads[name].start()
        assert told[name].wait(5)
    assert (places["a"], places["b"], places["c"]) == ([0], [1], [2])
    expected = {"a": ([0], [1, 0], [2, 1]), "b": ([0], [1, 0], [2, 1, 0]), "c": ([0], [1, 0], [2, 1, 0])}
    for before, name in (("holder", "a"), ("a", "b"), ("b", "c")):  # the slot passes down the line
        release[before].set()
        assert inside[name].wait(5)
        deadline = time.monotonic() + 5
        while (places["a"], places["b"], places["c"]) != expected[name] and time.monotonic() < deadline:
            time.sleep(0.01)
        assert (places["a"], places["b"], places["c"]) == expected[name]
    release["c"].set()
    for thread in threads.values():
        thread.join(5)
    assert order == ["holder", "a", "b", "c"]
    assert places["holder"] == []  # a free slot: no wait, no message
    assert [budget.place_in_words(n) for n in (0, 1, 2)] == \
        ["you are next in the queue", "1 job ahead of you in the queue", "2 jobs ahead of you in the queue"]


def test_a_waiter_that_gives_up_leaves_the_queue(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("ROLLOUT_MAX_HEAVY_JOBS", "1")
    monkeypatch.setattr(budget, "_QUEUES", {})
    with budget.heavy_slot():
        with pytest.raises(BudgetError, match="busy with 1 long"):
            with budget.heavy_slot(wait=0.05):
                pass
    with budget.heavy_slot(wait=0.05):  # nobody left waiting ahead: served at once
        pass


def test_a_flow_stops_at_its_next_checkpoint_once_asked():
    attentions = torch.softmax(torch.randn(3, 1, 2, 12, 12, generator=torch.Generator().manual_seed(0)), dim=-1)
    solved: list[int] = []
    with budget.cancellable(lambda: len(solved) >= 5):
        with pytest.raises(Cancelled):
            attention_flow(attentions, progress=lambda done, total: solved.append(done))
    assert len(solved) == 5  # stopped right after the request, not after all 144 problems
    with budget.cancellable(lambda: False):
        assert attention_flow(attentions).shape == (1, 12, 12)


def test_the_page_refuses_a_too_costly_flow_with_the_estimate(tiny_model_dir: Callable[[str], Path],
                                                              monkeypatch: pytest.MonkeyPatch):
    import streamlit as st

    monkeypatch.setenv("ROLLOUT_MAX_COMPUTE_SECONDS", "0.001")
    st.cache_resource.clear()
    at = AppTest.from_file(APP, default_timeout=120)
    at.query_params.update(model=str(tiny_model_dir("bert")), method="flow", text="the cat sat on the mat " * 10)
    at = at.switch_page("app_pages/text.py").run()
    assert not at.exception
    assert len(at.error) == 1 and "would take" in at.error[0].value and "use rollout" in at.error[0].value


@pytest.mark.parametrize("event, stops", [("nothing", False), ("stop", True), ("rerun", True),
                                          ("fragment_rerun", False), ("tab_closed", True)])
def test_the_page_s_stop_check_reads_streamlit_s_own_requests(event: str, stops: bool,
                                                               monkeypatch: pytest.MonkeyPatch):
    """The check a page's flow runs under, against the installed Streamlit's real ScriptRequests object."""
    from types import SimpleNamespace

    from streamlit.runtime import Runtime
    from streamlit.runtime.scriptrunner_utils import script_run_context
    from streamlit.runtime.scriptrunner_utils.script_requests import RerunData, ScriptRequests

    from app_pages._lib import core

    requests = ScriptRequests()
    active = {"s1": object()}
    monkeypatch.setattr(script_run_context, "get_script_run_ctx",
                        lambda *a, **k: SimpleNamespace(script_requests=requests, session_id="s1"))
    monkeypatch.setattr(Runtime, "instance", classmethod(lambda cls: SimpleNamespace(
        _session_mgr=SimpleNamespace(get_active_session_info=active.get))))
    gone = core._session_gone()
    if event == "stop":
        requests.request_stop()
    elif event == "rerun":
        requests.request_rerun(RerunData())
    elif event == "fragment_rerun":
        requests.request_rerun(RerunData(fragment_id="f", is_fragment_scoped_rerun=True))
    elif event == "tab_closed":
        active.clear()
    assert gone() is stops
