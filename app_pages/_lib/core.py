"""The pages' only way into rollout_core: cached model loads, cached explanations, a compute budget, error boxes.

Models come from the core's handle cache (`load_model`). Explanations, layer-view payloads and evaluations live
in one process-wide byte-bounded cache (`results()`), bounded by env ROLLOUT_RESULT_CACHE_MB, least recently used
first out, keyed on (model, input, `Options`, target): moving the layer slider or changing a display option
redraws without running the model again. Before a computation the cost is estimated (`rollout_core.serving.budget`):
over the limit it is refused with the estimate; a heavy one waits for one of the server's few heavy slots, and
stops at its next checkpoint when its session reruns, stops or is closed.
The core functions are looked up at call time (`explain.prepare`, `Prepared.run`), so tests can count calls.
"""
from __future__ import annotations

import dataclasses
import hashlib
import traceback
from contextlib import contextmanager
from typing import Any, Callable, Hashable, Iterator

import streamlit as st

from app_pages._lib.safe import safe_text
from app_pages._lib.visitor import visitor
from rollout_core import cancel
from rollout_core.errors import RolloutError
from rollout_core.lru import LRUCache
from rollout_core.options import Options
from rollout_core.serving import budget
from rollout_core.serving.result_cache import result_cache


def load(name: str, allow_pickle: bool = False) -> Any:
    """A `ModelHandle` from the core's one handle cache (`ROLLOUT_MODEL_CACHE_SIZE` models, one load per model
    across sessions)."""
    from rollout_core.models import loading

    return loading.load_model(name, allow_pickle=allow_pickle)


@st.cache_resource(show_spinner=False)
def results() -> LRUCache:
    """The process's one cache of explanations, payloads and evaluations (dropped by `st.cache_resource.clear`)."""
    return result_cache()


STOPPED = "_stopped_requests"
"""Session key: the heavy requests this session stopped (not started again by a rerun until asked)."""


class Stopped(Exception):
    """A heavy request this session stopped: the page shows a note and a button to run it again, not an error."""


def _request_id(key: Hashable) -> str:
    return hashlib.sha256(repr(key).encode()).hexdigest()[:16]


def _stop(request: str) -> None:
    st.session_state.setdefault(STOPPED, set()).add(request)


def _run_again(request: str) -> None:
    st.session_state.setdefault(STOPPED, set()).discard(request)


def stopped(request: str) -> bool:
    """Whether this session stopped the heavy request `request` (its Stop button)."""
    return request in st.session_state.get(STOPPED, ())


@contextmanager
def heavy_run(seconds: float | None, what: str, request: str, stop: bool = True) -> Iterator[None]:
    """Run the block as a heavy job estimated at `seconds` (None: not estimated): it says its estimate (`what`: what
    it is) with a Stop
    button (remembered under `request`, see `stopped`; `stop` False: the page shows its own), waits with a note for
    one of the server's heavy slots (one at a time per visitor), and runs cancellably (a Stop, a rerun or a closed
    tab ends it at its next checkpoint); the note and the button go when the block ends."""
    title = what[:1].upper() + what[1:] if what else "Computing"
    running = (f"{title}: estimated {budget.in_words(seconds)} on this server." if seconds is not None else
               f"{title}: one of the server's long computations.")
    panel = st.empty()
    with panel.container():
        note = st.empty()
        note.info(running)
        if stop:
            st.button("Stop", key=f"stop_{request}", on_click=_stop, args=(request,),
                      help="Stops the computation at its next step; nothing is lost but this result.")

    def waiting(place: budget.Place) -> None:
        why = "" if place.own else "the server is running its maximum of long computations; "
        note.info(f"Waiting for a free slot: {why}{budget.place_in_words(place)}. ({running})")

    try:
        with budget.heavy_slot(on_wait=waiting, owner=visitor()):
            note.info(running)
            with cancel.cancellable(_session_gone()):
                yield
    finally:
        panel.empty()


def cached(key: Hashable, compute: Callable[[], Any], seconds: float = 0.0, what: str = "", stop: bool = True,
           estimated: bool = True) -> Any:
    """`compute()` through `results()`. An estimated `seconds` of `budget.HEAVY_SECONDS` or more runs as a
    `heavy_run` (its estimate unless not `estimated`, a Stop unless the page has its own: `stop`, a heavy slot,
    cancellable); a stopped request is not started again by the reruns that follow until the visitor asks
    (`Stopped`)."""
    if seconds < budget.HEAVY_SECONDS:
        return results().get_or_compute(key, compute)
    request = _request_id(key)

    def heavy() -> Any:
        if stopped(request):
            st.info(f"Stopped{': ' + what if what else ''}. Change the input or the method, or run it again.")
            st.button("Run it again", key=f"again_{request}", on_click=_run_again, args=(request,))
            raise Stopped(request)
        with heavy_run(seconds if estimated else None, what, request, stop):
            return compute()

    return results().get_or_compute(key, heavy)


def _offer_cheaper(err: budget.BudgetError, method_key: str, what: str) -> None:
    """Below a refusal: a button that switches the page's method (sidebar key `method_key`) to the cheaper
    choice the refusal names (`what`: the refused work, which tells apart two refusals on one page)."""
    from rollout_core import methods

    def switch() -> None:
        st.session_state[method_key] = err.choice

    st.button(f"Use {methods.display_name(err.choice)} instead", on_click=switch, type="primary",
              key=f"cheaper_{method_key}_{err.choice}_{hashlib.sha256(what.encode()).hexdigest()[:8]}")


def _session_gone() -> Callable[[], bool]:
    """True once this script run was asked to stop or rerun, or its browser tab closed (Streamlit internals:
    when they are not there, a computation simply runs to its end)."""
    try:
        from streamlit.runtime import Runtime
        from streamlit.runtime.scriptrunner_utils.script_requests import ScriptRequestType
        from streamlit.runtime.scriptrunner_utils.script_run_context import get_script_run_ctx

        ctx = get_script_run_ctx()
        requests, session_id = ctx.script_requests, ctx.session_id
        manager = Runtime.instance()._session_mgr
    except Exception:  # no Streamlit server (AppTest, bare mode) or a changed internal API
        return lambda: False

    def gone() -> bool:
        state, data = requests._state, getattr(requests, "_rerun_data", None)
        # a rerun of fragments only (the layer explorer reporting its view) does not replace this run
        fragment_only = bool(getattr(data, "fragment_id_queue", None)) or getattr(data, "is_fragment_scoped_rerun",
                                                                                  False)
        return (state == ScriptRequestType.STOP or (state == ScriptRequestType.RERUN and not fragment_only)
                or manager.get_active_session_info(session_id) is None)

    return gone


def positions(handle: Any, source: str | bytes) -> tuple[int, int]:
    """`budget.positions` of the text or image `source` for the loaded `handle`, cached: a rerun for a display
    change does not tokenise or decode the input again."""
    digest = hashlib.sha256(source if isinstance(source, bytes) else source.encode("utf-8")).hexdigest()
    return results().get_or_compute(("positions", handle.name, digest), lambda: budget.positions(handle, source))


def explain_text(name: str, allow_pickle: bool, text: str, options: Options, target: str | int | None = None,
                 labels: tuple[str, ...] | None = None, keep_heads: bool = False, method_key: str = "method") -> Any:
    """`rollout_core.explain_text` within the compute budget, cached on the model name, text, options, target.

    `keep_heads`: keep every head's attention (the per-head panel); off, a 400-token explanation of a 12-head
    model is about 10 MB instead of 100 MB, and sessions that outlive the cache hold only that. `method_key`: the
    sidebar's method key, which a refusal's "use a cheaper method" button sets."""
    from rollout_core import explain

    options = dataclasses.replace(options, keep_heads=keep_heads)
    return _explained(("text", name, allow_pickle, text, options, target, labels),
                      lambda: explain.prepare(load(name, allow_pickle), text, options, modality="text", target=target,
                                              labels=list(labels) if labels else None), method_key)


def explain_image(name: str, allow_pickle: bool, image: bytes, options: Options,
                  target: str | int | None = None, method_key: str = "method") -> Any:
    """`rollout_core.explain_image` on the image bytes within the budget, cached on model, image digest, options
    (`method_key` as for `explain_text`)."""
    from rollout_core import explain

    return _explained(("image", name, allow_pickle, hashlib.sha256(image).hexdigest(), options, target),
                      lambda: explain.prepare(load(name, allow_pickle), image, options, modality="image",
                                              target=target), method_key)


_MISSING = object()


def _explained(key: Hashable, prepare: Callable[[], Any], method_key: str | None = None) -> Any:
    """The cached explanation of `key`; on a miss the request is `prepare`d (checked and encoded once), its cost
    estimated from that encoded input (`budget.check_prepared`), and the same prepared input explained. A
    refusal is tagged with the sidebar's `method_key` (for `guarded`'s cheaper-choice button)."""
    from rollout_core import methods

    hit = results().get(key, _MISSING)
    if hit is not _MISSING:
        return hit
    prepared = prepare()
    try:
        seconds = budget.check_prepared(prepared)
    except budget.BudgetError as err:
        err.method_key = method_key
        raise
    what = f"{methods.display_name(prepared.options.method)} on {prepared.handle.name}"
    return cached(key, prepared.run, seconds, what)


@contextmanager
def guarded(what: str) -> Iterator[None]:
    """Show a RolloutError as its message, anything else as a short box with details folded away.

    Use as `with guarded("explaining the text"): ...`; the page goes on after the block either way.
    """
    try:
        yield
    except Stopped:  # `cached` said so, with its button to run it again
        pass
    except cancel.Cancelled:  # this run was superseded (a new choice, Stop, a closed tab): no error, nothing failed
        st.info("Stopped: the page changed while this was computing.")
    except budget.BudgetError as err:
        st.error(safe_text(err))
        if err.choice and getattr(err, "method_key", None):
            _offer_cheaper(err, err.method_key, what)
    except RolloutError as err:
        st.error(safe_text(err))
    except Exception as err:  # a bug: keep the page usable, do not throw a traceback at the user
        st.error(safe_text(f"Unexpected error while {what}: {type(err).__name__}. The rest of the page still works."))
        with st.expander("Details for a bug report"):
            st.code("".join(traceback.format_exception(err)), language="text")


def run(what: str, fn: Any, *args: Any, **kwargs: Any) -> Any:
    """Call `fn` inside a status box saying `what`; return its result, or None after showing the error."""
    result = None
    with guarded(what):
        with st.spinner(safe_text(f"{what[0].upper()}{what[1:]}…")):
            result = fn(*args, **kwargs)
    return result


def _evaluation_seconds(handle: Any, source: Any, methods: tuple[str, ...], options: Options) -> float:
    """The budget check of every evaluated method, the input counted once for them all (references and cheap methods
    count as heavy anyway)."""
    sized, choices = budget.positions(handle, source), budget.choices(handle)
    seconds = sum(budget.check(m, budget.workload(handle, source, m, options.start_layer, options.end_layer,
                                                  full_matrix=options.full_matrix, sized=sized), choices=choices)
                  for m in methods)
    return max(seconds, budget.HEAVY_SECONDS)


def evaluate_input(name: str, allow_pickle: bool, source: str | bytes, methods: tuple[str, ...],
                   options: Options, references: tuple[str, ...], progress: Any = None, seeds: int = 1,
                   explanations: dict[str, Any] | None = None, grid: str | None = None) -> Any:
    """`rollout_core.faithfulness.evaluate.evaluate_input` within the budget, cached on model, input, methods,
    settings, agreement references, random orderings and grid (None: the modality's default). `progress(done,
    total, what)` is told how far a run is; `explanations`: the page's own explanations of this input with these
    options, not made again; neither is part of the cache key."""
    from rollout_core.faithfulness import evaluate

    handle = load(name, allow_pickle)
    kwargs = {k: v for k, v in options.kwargs().items() if k != "method"}
    digest = hashlib.sha256(source).hexdigest() if isinstance(source, bytes) else source
    key = ("evaluate", name, allow_pickle, digest, methods, options, references, seeds, grid)
    hit = results().get(key, _MISSING)  # a rerun showing a finished evaluation counts nothing again
    if hit is not _MISSING:
        return hit
    return cached(key,
                  lambda: evaluate.evaluate_input(handle, source, list(methods), references=references, seeds=seeds,
                                                  progress=progress, explanations=explanations, grid=grid,
                                                  **kwargs),
                  _evaluation_seconds(handle, source, methods, options),
                  f"evaluating {len(methods)} method{'s' if len(methods) != 1 else ''} on this input", stop=False)


def evaluate_dataset(name: str, allow_pickle: bool, dataset: str, methods: tuple[str, ...], limit: int,
                     options: Options, references: tuple[str, ...], progress: Any = None,
                     collect: list | None = None) -> Any:
    """`rollout_core.faithfulness.evaluate.evaluate_dataset` on a generated set, cached on its arguments
    (`collect` receives each finished example's rows, kept if the run is stopped; not part of the cache key)."""
    from rollout_core.faithfulness import evaluate

    handle = load(name, allow_pickle)
    kwargs = {k: v for k, v in options.kwargs().items() if k != "method"}
    return cached(("dataset", name, allow_pickle, dataset, methods, limit, options, references),
                  lambda: evaluate.evaluate_dataset(handle, dataset, list(methods), limit=limit, progress=progress,
                                                    references=references, collect=collect, **kwargs),
                  budget.HEAVY_SECONDS, f"evaluating {limit} examples", stop=False, estimated=False)
