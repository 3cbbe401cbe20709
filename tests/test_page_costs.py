"""Issue 26 item 7, where a user meets it: a request over the server's limit is refused with its estimate and a
button to the cheaper method the refusal names (any method, not only flow), and a long request shows its estimate
and a Stop button while it runs; a stopped request is not started again by the reruns that follow until asked."""
from __future__ import annotations

import asyncio
import concurrent.futures
from pathlib import Path
from typing import Any, Callable

import pytest
import streamlit as st
from page_views import page
from streamlit.proto.BackMsg_pb2 import BackMsg
from streamlit.proto.ClientState_pb2 import ClientState
from streamlit.proto.WidgetStates_pb2 import WidgetState, WidgetStates

from rollout_core import cancel, methods
from rollout_core.maths import flow
from rollout_core.models.loading import load_model
from rollout_core.serving import budget
from streamlit_runtime import RUN_SECONDS, runtime, wait_for

TEXT = "the cat sat on the mat " * 10


def _estimates(model: str, text: str, *names: str) -> list[float]:
    handle = load_model(model)
    return [budget.estimate_seconds(m, budget.workload(handle, text, m)) for m in names]


@pytest.mark.parametrize("costly", ["flow", "value_zeroing", "alti"])
def test_a_method_over_the_limit_is_refused_with_a_button_to_the_cheaper_one(costly: str,
                                                                            tiny_model_dir: Callable[[str], Path],
                                                                            monkeypatch: pytest.MonkeyPatch):
    model = str(tiny_model_dir("bert-long"))
    cheap, dear = _estimates(model, TEXT, "rollout", costly)
    assert cheap < dear
    monkeypatch.setenv("ROLLOUT_MAX_COMPUTE_SECONDS", str((cheap + dear) / 2))
    at = page("app_pages/text.py", model=model, method=costly, text=TEXT)
    assert not at.exception
    assert len(at.error) == 1, [e.value for e in at.error]
    message = at.error[0].value.replace("\\", "")  # Markdown-escaped on the page
    assert methods.display_name(costly) in message and f"({costly})" not in message  # no raw id on screen
    assert "would take" in message and "over this server's limit" in message
    offers = [b for b in at.button if b.label.startswith("Use ") and b.label.endswith(" instead")]
    assert len(offers) == 1
    named = offers[0].label[len("Use "):-len(" instead")]
    assert f"use {named} (" in message
    at = offers[0].click().run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    assert [b.value for b in at.selectbox if b.label == "Method"] == ["rollout"]
    assert at.query_params.get("method", ["rollout"]) == ["rollout"]  # the link follows (a default is left out)
    assert any("Prediction" in m.label for m in at.metric), "the cheaper method's explanation is on the page"


class Watch:
    """Client of a tab that keeps what it was sent: texts of the page's elements and the ids of its buttons."""

    def __init__(self) -> None:
        self.finished, self.client_context, self.texts, self.buttons = 0, None, [], {}

    def write_forward_msg(self, msg: Any) -> None:
        kind = msg.WhichOneof("type")
        if kind == "script_finished":
            self.finished += 1
        elif kind == "delta" and msg.delta.WhichOneof("type") == "new_element":
            element = msg.delta.new_element
            which = element.WhichOneof("type")
            if which == "button":
                self.buttons[element.button.label] = element.button.id
            elif which == "alert":
                self.texts.append(element.alert.body)


@pytest.mark.slow
def test_a_long_request_shows_its_estimate_and_a_stop_that_ends_it(tiny_model_dir: Callable[[str], Path],
                                                                  monkeypatch: pytest.MonkeyPatch):
    """Flow on 254 tokens of a 12-layer tiny BERT (seconds of max-flow problems): while it runs the page says its
    estimate and shows Stop; a click on Stop ends the flow at its next problem, and the rerun the click starts
    says it was stopped, offers to run it again, and does not start the flow again."""
    model, text = str(tiny_model_dir("bert-long")), " ".join(["the cat sat on the mat"] * 42)
    (seconds,) = _estimates(model, text, "flow")
    assert seconds > budget.HEAVY_SECONDS
    monkeypatch.setenv("ROLLOUT_MAX_COMPUTE_SECONDS", "1e9")
    solved = {"count": 0, "cancelled": False}

    def watched() -> None:
        solved["count"] += 1
        try:
            cancel.checkpoint()
        except cancel.Cancelled:
            solved["cancelled"] = True
            raise

    monkeypatch.setattr(flow, "checkpoint", watched)
    st.cache_resource.clear()
    query = {"model": model, "method": "flow", "text": text}

    async def scenario() -> tuple[list[str], list[str], int, int]:
        async with runtime(session_ttl=600) as rt:
            tab = Watch()
            session_id = rt.connect_session(client=tab, user_info={})
            rt.handle_backmsg(session_id, BackMsg(rerun_script=ClientState(
                query_string="&".join(f"{k}={v}" for k, v in query.items()).replace(" ", "+"), page_name="text")))
            await wait_for(lambda: solved["count"] > 0 and "Stop" in tab.buttons, RUN_SECONDS, "the flow starting")
            while_running = list(tab.texts)
            click = WidgetStates(widgets=[WidgetState(id=tab.buttons["Stop"], trigger_value=True)])
            tab.texts.clear()
            rt.handle_backmsg(session_id, BackMsg(rerun_script=ClientState(
                query_string="&".join(f"{k}={v}" for k, v in query.items()).replace(" ", "+"), page_name="text",
                widget_states=click)))
            await wait_for(lambda: solved["cancelled"], 30, "the flow stopping")
            stopped_at = solved["count"]
            await wait_for(lambda: any("Stopped" in t for t in tab.texts), RUN_SECONDS, "the stopped note")
            await asyncio.sleep(1.0)
            assert "Run it again" in tab.buttons
            return while_running, list(tab.texts), stopped_at, solved["count"]

    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        while_running, after, stopped_at, later = pool.submit(asyncio.run, scenario()).result()
    assert any("estimated " + budget.in_words(seconds) in t for t in while_running), while_running
    assert any("Stopped" in t for t in after) and later == stopped_at, (after, stopped_at, later)


def test_compare_offers_each_refused_side_its_own_cheaper_choice(tiny_model_dir: Callable[[str], Path],
                                                                 monkeypatch: pytest.MonkeyPatch):
    """Two models, one method: both sides refused on one page, each with its button (no clash), and one click
    switches the shared method."""
    model_a, model_b = str(tiny_model_dir("bert-long")), str(tiny_model_dir("bert-deep"))
    cheap = max(_estimates(m, TEXT, "rollout")[0] for m in (model_a, model_b))
    dear = min(_estimates(m, TEXT, "flow")[0] for m in (model_a, model_b))
    assert cheap < dear
    monkeypatch.setenv("ROLLOUT_MAX_COMPUTE_SECONDS", str((cheap + dear) / 2))
    at = page("app_pages/compare.py", mode="models", model=model_a, model_b=model_b, method="flow", text=TEXT)
    assert not at.exception
    assert len(at.error) == 2 and all("Attention flow on" in e.value.replace("\\", "") for e in at.error)
    offers = [b for b in at.button if b.label.startswith("Use ") and b.label.endswith(" instead")]
    assert len(offers) == 2
    at = offers[0].click().run()
    assert not at.exception and not at.error, [e.value for e in at.error]


def _estimate_captions(at: Any) -> list[str]:
    return [c.value.replace("\\", "") for c in at.sidebar.caption if c.value.startswith("Estimated ")]


def test_the_sidebar_says_the_chosen_methods_estimate_before_it_runs(tiny_model_dir: Callable[[str], Path],
                                                                     monkeypatch: pytest.MonkeyPatch):
    """Under the method picker, for the model and the input on the page: the chosen method's estimate (the one the
    budget checks), and for a method over the limit that it would be refused, with the figure its refusal gives."""
    model = str(tiny_model_dir("bert-long"))
    cheap, dear = _estimates(model, TEXT, "rollout", "flow")
    monkeypatch.setenv("ROLLOUT_MAX_COMPUTE_SECONDS", str((cheap + dear) / 2))
    tokens = len(load_model(model).processor(TEXT.strip())["input_ids"])  # the page strips the text
    at = page("app_pages/text.py", model=model, method="rollout", text=TEXT)
    assert not at.exception and not at.error, [e.value for e in at.error]
    assert _estimate_captions(at) == [f"Estimated {budget.in_words(cheap)} on this input ({tokens} tokens)."]
    at.sidebar.selectbox(key="method").set_value("flow").run()
    (caption,) = _estimate_captions(at)
    assert caption.startswith(f"Estimated {budget.in_words(dear)} on this input") and "would be refused" in caption
    (refusal,) = [e.value.replace("\\", "") for e in at.error]
    assert f"would take {budget.in_words(dear)}" in refusal  # the same figure as the refusal's

    image_model = str(tiny_model_dir("vit"))
    at = page("app_pages/image.py", model=image_model, method="rollout")
    (caption,) = _estimate_captions(at)
    assert caption.startswith("Estimated ") and "patches)" in caption and "refused" not in caption

    model_b = str(tiny_model_dir("bert-deep"))
    both = sum(_estimates(m, TEXT, "rollout")[0] for m in (model, model_b))
    at = page("app_pages/compare.py", mode="models", model=model, model_b=model_b, method="rollout", text=TEXT)
    assert [c.split(" on this input")[0] for c in _estimate_captions(at)] == [f"Estimated {budget.in_words(both)}"]
    at = page("app_pages/compare.py", mode="methods", model=model, method="rollout", b_method="flow", text=TEXT)
    assert [("refused" in c) for c in _estimate_captions(at)] == [False, True]  # each side its own
