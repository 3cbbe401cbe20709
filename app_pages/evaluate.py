"""Evaluate page: how faithful each method's map is (perturbation curves, ground truth, agreement)."""
from __future__ import annotations

import time
from typing import Callable

import streamlit as st

from app_pages._lib import core, views
from app_pages._lib.inputs import image_input, text_input
from app_pages._lib.sidebar import loaded, model_and_method
from app_pages._lib.state import param, sync_url
from rollout_core import methods as registry
from rollout_core.faithfulness.evaluate import (
    DEFAULT_REFERENCES,
    FULL_GRID,
    GRIDS,
    INPUT_GRID,
    METHODS,
    REFERENCES,
    DatasetEvaluation,
    summarize,
)
from rollout_core.faithfulness.measures import not_computed
from rollout_core.faithfulness.perturbation import CURVES
from rollout_core.faithfulness.views import (
    curve_figure,
    progress_text,
    readable_summary,
    readable_table,
    what_ran,
)

st.title("Evaluate")
st.markdown("Remove the most (or least) relevant tokens/patches first and watch the predicted class: a faithful "
            "map makes the probability fall fast on deletion and rise fast on insertion. The **random** row is "
            "chance. Arrows say which direction is better. The input is the one of the Text or Image page "
            "(uploads included), with the model chosen in the sidebar (any hub id or folder). A data-set run "
            "can be stopped part way (its **Stop** button or Streamlit's, top right); the examples done are kept.")

param("modality", "text", ("text", "image"))
modality = st.radio("Input", ["text", "image"], key="modality", horizontal=True, format_func=str.capitalize)
name, allow_pickle, method, _ = model_and_method(modality, method_header="Method options")

handle = loaded(name, allow_pickle)
runnable = [s.name for s in registry.runnable(handle)] if handle is not None else list(METHODS)
choices = tuple(dict.fromkeys((*runnable, *REFERENCES)))
# the page's default (the model's measured best, what the Text and Image pages show) first, then plain rollout and
# raw attention as the familiar baselines
starting = list(dict.fromkeys(m for m in (method.method, "rollout", "attention") if m in runnable))
if any(m not in choices for m in st.session_state.get("methods", ())):  # another model: keep what can run
    st.session_state["methods"] = [m for m in st.session_state["methods"] if m in choices] or starting
methods = tuple(st.multiselect("Methods", choices, default=starting, key="methods",
                               format_func=registry.display_name))
one, many = st.tabs(["One input", "Generated data set (with ground truth)"])
PARTIAL = "evaluate_partial"
STOPPED_ONE = "evaluate_one_stopped"


def _table(frame, notes: list[str]) -> None:  # noqa: ANN001 - a DataFrame of formatted cells
    """The table with its method columns under their display names (no raw ids on screen), and its notes; a
    static table, whose cells and headers wrap to the page's width (a data frame's columns do not wrap, and the
    last methods' columns were scrolled out of sight)."""
    shown = frame.rename(columns=lambda c: registry.display_name(c) if c in registry.names() else c)
    st.table(shown)
    for note in notes:
        st.caption(note)


def _progress(bar: object, unit: str | None = None) -> Callable[..., None]:
    """A progress callback drawing into `bar`: what is running, the time left and (with a `unit`) the count; without
    one, done and total are one input's milliseconds of work (`StepProgress`)."""
    start = time.monotonic()

    def report(done: int, total: int, what: str = "") -> None:
        bar.progress(min(1.0, done / total) if total else 0.0, progress_text(done, total, time.monotonic() - start,
                                                                             what, unit))

    return report


def _stop_one() -> None:
    """Before the rerun the Stop click starts (which stops the running evaluation): do not start it again."""
    st.session_state["evaluate_one"] = False
    st.session_state[STOPPED_ONE] = True


def _page_explanation(source: str | bytes) -> object:
    """The explanation the Text and Image pages show for this input (cached there): its prediction is shown here
    and, when its method is evaluated, the evaluation uses it instead of explaining again."""
    explain = core.explain_text if modality == "text" else core.explain_image
    return core.run("reading the prediction", explain, name, allow_pickle, source, method)


def _prediction(exp: object, result: object) -> None:
    """The prediction as the Text and Image pages show it (calibrated, with its reliability notes); the curves
    follow the model's own probability."""
    if exp is None:
        return
    views.prediction(exp, "Predicted (target of every curve)")
    if exp.prediction and abs(exp.prediction[0].probability - result.probability) >= 0.0005:
        st.caption(f"The curves follow the model's uncalibrated probability ({result.probability:.1%} on the "
                   "unperturbed input); the figure above is calibrated, as on the other pages.")


with one:
    if modality == "text":
        source = text_input()
    else:
        source = image_input().data
    st.caption("By default one input is evaluated with the methods above and one random ordering (the chance row), "
               f"its curves read at {INPUT_GRID[modality]}, every perturbation of every method scored together. "
               "Add what costs more here:")
    ask = st.columns(3)
    one_gxi = ask[0].checkbox("Gradient × input reference", key=f"one_gxi_{modality}",
                              help="The “Rank agreement with gradient × input” row: one gradient pass.")
    one_ig = ask[1].checkbox("Integrated-gradients reference", key=f"one_ig_{modality}",
                             help="The “Rank agreement with integrated gradients” row: 32 gradient passes, about "
                                  "10 explanations of a sentence and 40 of an image.")
    param("seeds", 1, low=1, high=10)
    seeds = ask[2].number_input("Random orderings", 1, 10, key="seeds",
                                help="More orderings make the chance row steadier; each costs as much as a method.")
    one_references = tuple(r for r, on in (("gxi", one_gxi), ("ig", one_ig)) if on)
    grid = st.radio("Curves read at", list(GRIDS), index=list(GRIDS).index(INPUT_GRID[modality]),
                    key=f"one_grid_{modality}", horizontal=True, format_func=lambda g: GRIDS[g].words(),
                    help=f"The fractions of the {'tokens' if modality == 'text' else 'patches'} removed / put back "
                         f"at which each curve is scored. {FULL_GRID.capitalize()}: the full protocol of the "
                         "data sets and the recorded tables. Fifths, quarters: about a half, a third as many "
                         "perturbed inputs; quarters is an image's default (each of its perturbed inputs costs about "
                         "half an explanation).")
    if st.button("Evaluate this input", type="primary", disabled=not methods) and source is not None:
        st.session_state["evaluate_one"] = True
    if st.session_state.pop(STOPPED_ONE, False):
        st.info("Stopped: nothing was kept of this input's run. Evaluate it again, with fewer methods if it is slow.")
    if st.session_state.get("evaluate_one") and source is not None and methods:
        running = st.empty()  # the Stop button and the progress bar, cleared when the run ends
        with running.container():
            st.button("Stop", key="evaluate_one_stop", on_click=_stop_one,
                      help="Stops the run at its next model pass (Streamlit's own Stop, top right, does the same).")
            bar = st.progress(0.0, "starting")
        page_exp = _page_explanation(source)
        given = {method.method: page_exp} if page_exp is not None and method.method in methods else None
        result = core.run(f"perturbing the input for {len(methods)} methods", core.evaluate_input, name,
                          allow_pickle, source, methods, method, one_references, progress=_progress(bar),
                          seeds=int(seeds), explanations=given, grid=grid)
        running.empty()
        if result is not None:
            _prediction(page_exp, result)
            for note in result.notes:
                st.warning(note)
            st.caption(what_ran(result))
            _table(*readable_table(result.table, result.not_computed, result.grid))
            cols = st.columns(2)
            for i, curve in enumerate(CURVES):
                with cols[i % 2]:
                    st.plotly_chart(curve_figure(result, curve), key=f"curve_{curve}")

def _dataset_result(result: DatasetEvaluation, note: str = "") -> None:
    if note:
        st.warning(note)
    st.metric("Model accuracy on these examples", f"{result.accuracy:.1%}")
    _table(*readable_summary(result.summary, result.not_computed))


with many:
    ig = st.checkbox("Integrated-gradients reference (the “Rank agreement with integrated gradients” row)",
                     value="ig" in DEFAULT_REFERENCES[modality], key=f"ig_reference_{modality}",
                     help="32 gradient passes per example: cheap on a sentence, about 40 explanations of an image, so "
                          "off for images unless ticked (or unless integrated_gradients is one of the methods). "
                          "Gradient × input is always computed over a data set.")
    references = ("gxi", "ig") if ig else ("gxi",)
    param("limit", 10, low=2, high=100)
    limit = st.slider("Examples", 2, 100, key="limit")
    if st.button(f"Evaluate {limit} generated {modality} examples", disabled=not methods):
        # the finished examples' rows live in the session: a Stop (below, or Streamlit's) reruns the page, the
        # evaluation stops at its next example, and the rerun shows what was done
        done: list = []
        st.session_state[PARTIAL] = {"rows": done, "methods": list(methods), "limit": limit, "references": references}
        running = st.empty()  # the Stop button and the progress bar, cleared when the run ends
        with running.container():
            st.button("Stop", key="evaluate_stop", help="Stops after the example being evaluated; the table then "
                                                        "covers the examples done so far.")
            bar = st.progress(0.0, "starting")
        result = core.run(f"evaluating {limit} examples", core.evaluate_dataset, name, allow_pickle, modality,
                          methods, limit, method, references, _progress(bar, "examples"), done)
        running.empty()
        if result is not None:
            del st.session_state[PARTIAL]
            _dataset_result(result)
    elif (stopped := st.session_state.pop(PARTIAL, None)) is not None:
        examples = len({row["example"] for row in stopped["rows"]})
        if examples:
            missing = not_computed(stopped.get("references", ()), stopped["methods"])
            _dataset_result(summarize(stopped["rows"], stopped["methods"], examples, missing),
                            f"Stopped after {examples} of {stopped['limit']} examples: the table covers those.")
        else:
            st.info("Stopped before the first example finished.")

sync_url()
