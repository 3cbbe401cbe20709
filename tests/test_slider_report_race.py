"""Issue 26, the slider reset race, as a real Streamlit runtime sees it (no browser): the explorer reports its
slider position a moment after a move (debounced), as a rerun of its fragment. When the user moves the slider and
then picks another method at once, the method's full rerun runs first (a fragment rerun does not interrupt it) and
resets the view to the final map; the report of the move, made for the old method, runs after it. It must not put
the new method's view back at the layer chosen for the old one (the newcomer walk saw layer 1 of 12 after a switch).
A report for the method on screen is still taken."""
from __future__ import annotations

import asyncio
import concurrent.futures
import json
from pathlib import Path
from typing import Any, Callable

import streamlit as st
from streamlit.proto.BackMsg_pb2 import BackMsg
from streamlit.proto.ClientState_pb2 import ClientState
from streamlit.proto.WidgetStates_pb2 import WidgetState, WidgetStates

from page_views import EXPLORER
from rollout_core import methods
from streamlit_runtime import RUN_SECONDS, runtime, wait_for


class Tab:
    """What a browser tab was sent: full runs started and runs finished, the method picker (its id and option
    labels) and the layer explorer's last data, widget id and fragment."""

    def __init__(self) -> None:
        self.started = self.finished = 0
        self.client_context = None
        self.picker: Any = None
        self.explorer: dict[str, Any] = {}
        self.explorer_id = self.fragment = ""

    def write_forward_msg(self, msg: Any) -> None:
        kind = msg.WhichOneof("type")
        if kind == "new_session":
            self.started += 1
        elif kind == "script_finished":
            self.finished += 1
        elif kind == "delta" and msg.delta.WhichOneof("type") == "new_element":
            element = msg.delta.new_element
            which = element.WhichOneof("type")
            if which == "selectbox" and element.selectbox.label == "Method":
                self.picker = element.selectbox
            elif which == "bidi_component" and element.bidi_component.component_name == EXPLORER:
                self.explorer = json.loads(element.bidi_component.json)
                self.explorer_id, self.fragment = element.bidi_component.id, msg.delta.fragment_id


def _layers_after_reports(model: str) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    """/image on rollout; the method switched to raw attention and, once that run has started, the explorer's
    report of a move to layer 1 made on rollout's view; then a report of a move to layer 1 on raw attention's view.
    The explorer's data first, after the stale report and after the current one."""
    query = f"model={model}&method=rollout"

    async def scenario() -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
        async with runtime(session_ttl=60) as rt:
            tab = Tab()
            session = rt.connect_session(client=tab, user_info={})

            def rerun(widgets: dict[str, WidgetState], fragment: str = "") -> None:
                rt.handle_backmsg(session, BackMsg(rerun_script=ClientState(
                    query_string=query, page_name="image", fragment_id=fragment,
                    widget_states=WidgetStates(widgets=widgets.values()))))

            def report(identity: str) -> None:
                view = {"layer": 1, "raw": False, "controls": {}, "identity": identity}
                widgets[tab.explorer_id] = WidgetState(id=tab.explorer_id, json_value=json.dumps({"view": view}))
                rerun(widgets, tab.fragment)

            rerun({})
            await wait_for(lambda: tab.finished == 1 and tab.explorer, RUN_SECONDS, "the first run")
            first = tab.explorer
            widgets = {w.id: w for w in rt._session_mgr.get_active_session_info(session).session.session_state
                       .get_widget_states()}  # a browser sends every widget's value with each rerun
            chosen = next(o for o in tab.picker.options if o.startswith(methods.display_name("attention")))
            widgets[tab.picker.id] = WidgetState(id=tab.picker.id, string_value=chosen)
            rerun(widgets)
            await wait_for(lambda: tab.started == 2, RUN_SECONDS, "the switch starting")
            report(first["identity"])  # a move made before the switch, reported while its run goes on
            await wait_for(lambda: tab.finished == 3, RUN_SECONDS, "the switch and the report's rerun")
            await asyncio.sleep(0.5)  # nothing else follows
            stale = tab.explorer
            report(stale["identity"])  # a move on the new method's view
            await wait_for(lambda: tab.finished == 4, RUN_SECONDS, "the second report's rerun")
            return first, stale, tab.explorer

    st.cache_resource.clear()
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, scenario()).result()


def test_a_move_reported_for_the_previous_method_leaves_the_new_methods_map_final(
        tiny_model_dir: Callable[[str], Path]) -> None:
    first, stale, current = _layers_after_reports(str(tiny_model_dir("vit")))
    assert stale["identity"] != first["identity"], "the method switch was not run"
    assert stale["layer"] == stale["layers"] > 1, f"the new method shown at layer {stale['layer']} of {stale['layers']}"
    assert (current["identity"], current["layer"]) == (stale["identity"], 1), "a move on the view shown was lost"
