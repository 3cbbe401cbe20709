"""Issue 16: a request's cost is estimated before it runs and refused above the limit with a cheaper choice; at most
ROLLOUT_MAX_HEAVY_JOBS heavy computations at once; a flow stops at its next checkpoint once asked to."""
from __future__ import annotations

import dataclasses
import threading
import time
from pathlib import Path
from typing import Callable

import pytest
import torch
from streamlit.testing.v1 import AppTest

from rollout_core import cancel
from rollout_core.cancel import Cancelled
from rollout_core.serving import budget
from rollout_core.serving.budget import BudgetError
from rollout_core.maths.flow import attention_flow
from rollout_core.maths.flow_bounded import PRUNED_EDGE_SHARE, flow_cost_estimate
from rollout_core.methods._cost import forward_seconds
from rollout_core.methods._spec import Workload
from rollout_core.methods.flow import PROBLEM_SECONDS, SOLVER_FACTOR
from rollout_core.models.loading import load_model

APP = str(Path(__file__).resolve().parents[1] / "app.py")


def _prefix_rows(n: int, layers: int, outputs: int = 1, kept: float = 1.0) -> float:
    """The solver's estimate for the explained row of every layer prefix, as methods.flow.compute solves: its edges
    at flow_cost_estimate's rate (times SOLVER_FACTOR) and a fixed cost per max-flow problem."""
    return sum(_solver(flow_cost_estimate(n, top, 1, outputs=outputs, kept=kept)) for top in range(1, layers + 1))


def _solver(estimate: dict[str, float]) -> float:
    return SOLVER_FACTOR * estimate["seconds"] + PROBLEM_SECONDS * estimate["max_flows"]


def _work(n: int, layers: int, **kw) -> Workload:
    return Workload(tokens=n, layers=layers, model_layers=layers, heads=12, hidden=384, **kw)


def test_the_flow_estimate_is_the_forward_pass_and_the_solver_s_cost_model():
    forward = forward_seconds(_work(128, 6))
    assert budget.estimate_seconds("flow", _work(128, 6)) == \
        pytest.approx(forward + _prefix_rows(128, 6))
    assert budget.estimate_seconds("flow", _work(128, 6, full_matrix=True)) == \
        pytest.approx(forward + _prefix_rows(128, 6) + _solver(flow_cost_estimate(128, 6, 128)))
    # images: mass-pruned rows only (no matrix view), here for a readout pooling every position
    image = _work(257, 12, image=True, outputs=257, full_matrix=True)
    assert budget.estimate_seconds("flow", image) == \
        pytest.approx(forward_seconds(image) + _prefix_rows(257, 12, outputs=257,
                                                                            kept=PRUNED_EDGE_SHARE))


@pytest.mark.parametrize("shape", [{}, {"image": True, "outputs": 8}, {"full_matrix": True}])
def test_the_flow_estimate_grows_with_the_tokens_and_the_layers(shape: dict):
    costs = [[budget.estimate_seconds("flow", _work(n, layers, **shape)) for n in (16, 64, 256)]
             for layers in (2, 6, 12)]
    assert all(a < b for row in costs for a, b in zip(row, row[1:]))
    assert all(a < b for column in zip(*costs) for a, b in zip(column, column[1:]))


def test_over_the_limit_is_refused_with_the_estimate_and_a_cheaper_choice(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("ROLLOUT_MAX_COMPUTE_SECONDS", "40")
    assert budget.check("flow", _work(128, 6)) == pytest.approx(budget.estimate_seconds("flow", _work(128, 6)))
    seconds = budget.estimate_seconds("flow", _work(1024, 6))
    assert seconds > 60
    with pytest.raises(BudgetError) as err:
        budget.check("flow", _work(1024, 6), choices=("rollout", "flow"))
    message = str(err.value)
    assert "Attention flow on 1024 tokens" in message and "(flow)" not in message
    assert budget.in_words(seconds) in message
    assert "use Attention rollout (" in message and "\n" not in message
    # the suggested length fits, and is not far below the longest that does
    fits = int(message.split("shorten the text to about ")[1].split()[0])
    assert budget.estimate_seconds("flow", _work(fits, 6)) <= 40
    assert budget.estimate_seconds("flow", _work(int(fits / 0.8), 6)) > 40


def test_durations_in_words():
    assert [budget.in_words(s) for s in (0.02, 0.34, 0.97, 45, 272, 2700, 9000)] == \
        ["under 0.1 s", "about 0.3 s", "about 1 s", "about 45 s", "about 5 min", "about 45 min", "about 2.5 h"]


@pytest.mark.parametrize("kind, outputs", [("bert", 1), ("sentence", 5)])
def test_a_request_is_counted_in_the_model_s_tokens_and_readout(kind: str, outputs: int,
                                                                tiny_model_dir: Callable[[str], Path],
                                                                monkeypatch: pytest.MonkeyPatch):
    """[CLS] the cat sat [SEP]: 5 tokens; a classifier reads [CLS], a sentence encoder pools all 5."""
    handle = load_model(tiny_model_dir(kind))
    layers = handle.num_layers
    work = budget.workload(handle, "the cat sat", "flow")
    assert (work.tokens, work.outputs, work.layers, work.model_layers) == (5, outputs, layers, layers)
    assert not work.image
    assert (work.heads, work.hidden) == (handle.num_heads, handle.config.hidden_size)
    assert budget.check_request(handle, "the cat sat", "flow") == pytest.approx(budget.estimate_seconds("flow", work))
    assert budget.check_request(handle, "the cat sat", "flow", full_matrix=True) == \
        pytest.approx(budget.estimate_seconds("flow", dataclasses.replace(work, full_matrix=True)))
    monkeypatch.setenv("ROLLOUT_MAX_COMPUTE_SECONDS", "1e-9")
    with pytest.raises(BudgetError, match=rf"Attention flow on 5 tokens through {layers} layers"):
        budget.check_request(handle, "the cat sat", "flow")


def test_an_image_request_is_counted_in_the_processed_image_s_patches(tiny_model_dir: Callable[[str], Path]):
    from rollout_core.data.example_images import example_images
    from rollout_core.explain import explain_image

    handle = load_model(tiny_model_dir("dinov2"))
    image = next(iter(example_images().values()))
    n = len(explain_image(handle, image).tokens)
    work = budget.workload(handle, image, "flow")
    assert (work.tokens, work.outputs, work.image) == (n, 1, True)
    assert budget.check_request(handle, image, "flow") == pytest.approx(budget.estimate_seconds("flow", work))


def test_the_estimate_is_near_the_measured_time_of_a_flow(tiny_model_dir: Callable[[str], Path]):
    """A 12-layer tiny BERT on 62 tokens (0.16 s by the estimate): the page's flow, timed beyond the same
    explanation by rollout, within a generous factor of the estimate (the machine is shared)."""
    from rollout_core.explain import explain_text

    handle = load_model(tiny_model_dir("bert-long"))
    text = " ".join(["the cat sat on the mat"] * 10)  # 62 tokens
    explain_text(handle, "the cat", method="flow")  # numba loads its compiled kernel once per process
    start = time.perf_counter()
    explain_text(handle, text, method="rollout")
    middle = time.perf_counter()
    explain_text(handle, text, method="flow")
    measured = (time.perf_counter() - middle) - (middle - start)
    work = budget.workload(handle, text, "flow")
    assert work.tokens == 62
    estimate = budget.estimate_seconds("flow", work) - budget.estimate_seconds("rollout", work)
    assert estimate / 10 < max(measured, 1e-3) < estimate * 10, (estimate, measured)


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
        def on_wait(place: budget.Place) -> None:
            places[name].append(place.ahead)
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
    assert [budget.place_in_words(budget.Place(n, own=False)) for n in (0, 1, 2)] == \
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
    with cancel.cancellable(lambda: len(solved) >= 5):
        with pytest.raises(Cancelled):
            attention_flow(attentions, progress=lambda done, total: solved.append(done))
    assert len(solved) == 5  # stopped right after the request, not after all 144 problems
    with cancel.cancellable(lambda: False):
        assert attention_flow(attentions).shape == (1, 12, 12)


def test_the_page_refuses_a_too_costly_flow_with_the_estimate(tiny_model_dir: Callable[[str], Path],
                                                              monkeypatch: pytest.MonkeyPatch):
    """The limit between rollout's estimate and flow's on this input: flow is refused, rollout offered."""
    import streamlit as st

    model, text = str(tiny_model_dir("bert-long")), "the cat sat on the mat " * 10
    handle = load_model(model)
    cheap, costly = (budget.estimate_seconds(m, budget.workload(handle, text, m)) for m in ("rollout", "flow"))
    assert cheap < costly
    monkeypatch.setenv("ROLLOUT_MAX_COMPUTE_SECONDS", str((cheap + costly) / 2))
    st.cache_resource.clear()
    at = AppTest.from_file(APP, default_timeout=120)
    at.query_params.update(model=model, method="flow", text=text)
    at = at.switch_page("app_pages/text.py").run()
    assert not at.exception
    assert len(at.error) == 1 and "would take" in at.error[0].value and "use Attention rollout" in at.error[0].value


@pytest.mark.parametrize("event, stops", [("nothing", False), ("stop", True), ("rerun", True),
                                          ("fragment_rerun", False), ("fragment_widget", False),
                                          ("fragment_then_full", True), ("tab_closed", True)])
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
    elif event == "fragment_widget":  # a widget inside a fragment (the layer explorer reporting its view)
        requests.request_rerun(RerunData(fragment_id="f"))
    elif event == "fragment_then_full":  # ...then a sidebar choice: the whole page reruns
        requests.request_rerun(RerunData(fragment_id="f"))
        requests.request_rerun(RerunData())
    elif event == "tab_closed":
        active.clear()
    assert gone() is stops


def test_a_visitor_runs_one_heavy_job_at_a_time_and_others_pass(monkeypatch: pytest.MonkeyPatch):
    """Issue 30: one visitor with two Evaluate tabs held both heavy slots and every other visitor waited 30 s and
    was refused. Two slots: visitor A's second job waits (told it is its own other job) while B takes the free
    slot at once; when A's first job ends, its second runs."""
    monkeypatch.setenv("ROLLOUT_MAX_HEAVY_JOBS", "2")
    monkeypatch.setattr(budget, "_QUEUES", {})
    first_in, first_out, second_in = threading.Event(), threading.Event(), threading.Event()
    told: list[budget.Place] = []

    def first() -> None:
        with budget.heavy_slot(owner="A"):
            first_in.set()
            first_out.wait(10)

    def second() -> None:
        with budget.heavy_slot(wait=10, owner="A", on_wait=told.append):
            second_in.set()

    threads = [threading.Thread(target=first), threading.Thread(target=second)]
    threads[0].start()
    assert first_in.wait(5)
    threads[1].start()
    deadline = time.monotonic() + 5
    while not told and time.monotonic() < deadline:
        time.sleep(0.01)
    assert told == [budget.Place(ahead=0, own=True)] and not second_in.is_set()
    assert "one at a time per visitor" in budget.place_in_words(told[0])
    with budget.heavy_slot(wait=0.5, owner="B"):  # the second slot is free for another visitor, queued A or not
        assert not second_in.is_set()
    with pytest.raises(BudgetError, match="your other long computation"):
        with budget.heavy_slot(wait=0.05, owner="A"):
            pass
    first_out.set()
    assert second_in.wait(5)
    for thread in threads:
        thread.join(5)
    with budget.heavy_slot(wait=0.05, owner="A"):  # all done: A may run again
        pass


def test_the_estimate_before_a_run_is_the_one_the_check_makes_with_discarding(tiny_handle):
    """The sidebar's line and `check_prepared` build the same workload: rollout with a discard ratio computes its
    final product, so both count it."""
    handle = tiny_handle("bert")
    sized = (4000, 1)  # positions, pooled outputs: long enough for the product to show in the line
    plain, discarding = (budget.workload(handle, None, "rollout", sized=sized, discard=d) for d in (False, True))
    assert budget.estimate_seconds("rollout", discarding) > budget.estimate_seconds("rollout", plain)
    told = {d: budget.before_run((handle,), (sized,), "rollout", discard=d) for d in (False, True)}
    expected = {d: budget.in_words(budget.estimate_seconds("rollout", w))
                for d, w in ((False, plain), (True, discarding))}
    assert expected[False] != expected[True]  # the line can tell the two apart on this input
    for d in (False, True):
        assert told[d].startswith(f"Estimated {expected[d]} on this input"), (d, told[d])
