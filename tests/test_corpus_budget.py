"""Issue 30 item 3: the Corpus page goes through the same budget as the other pages: an estimate per run from the
methods' own cost (batched as the engine batches), a refusal over the limit with a button to the cheaper method,
the heavy slots with at most one heavy job per visitor (a visitor's second one waits with a note, another visitor's
runs), and a Stop."""
from __future__ import annotations

import functools
import threading
from pathlib import Path
from typing import Callable

import pytest
import streamlit as st
from streamlit.delta_generator import DeltaGenerator
from streamlit.testing.v1 import AppTest

from app_pages._lib import core
from rollout_core.data.sentiment import generate
from rollout_core.models.loading import load_model
from rollout_core.serving import budget

ROOT = Path(__file__).resolve().parents[1]
ROWS = 20


def _page(model: Path, method: str) -> AppTest:
    st.cache_resource.clear()
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=120)
    at.query_params.update(model=str(model), corpus_method=method, rows=str(ROWS))
    return at.switch_page("app_pages/corpus.py").run()


def _explain(at: AppTest) -> AppTest:
    return next(b for b in at.button if b.label == "Explain").click().run()


def _sum(model: Path, method: str) -> float:
    texts = [e.text for e in generate(ROWS, seed=0)]
    batches = budget.corpus_batches(load_model(str(model)), texts, method, 16)
    assert sum(w.batch for w in batches) == ROWS and [w.batch for w in batches] == [16, 4]
    return budget.check_batches(method, batches, limit=1e9)


def test_the_run_s_estimate_is_shown_before_it_runs(tiny_model_dir: Callable[[str], Path]):
    model = tiny_model_dir("bert")
    at = _page(model, "alti")
    assert not at.exception and not at.error
    expected = budget.in_words(_sum(model, "alti"))
    assert any(c.value.startswith("Estimated time with ALTI rollout: " + expected + f" for {ROWS} rows")
               for c in at.caption), [c.value for c in at.caption]


def test_a_run_over_the_limit_is_refused_with_a_button_to_the_cheaper_method(tiny_model_dir: Callable[[str], Path],
                                                                            monkeypatch: pytest.MonkeyPatch):
    model = tiny_model_dir("bert")
    cheap, dear = _sum(model, "rollout"), _sum(model, "value_zeroing")
    assert cheap < dear
    monkeypatch.setenv("ROLLOUT_MAX_COMPUTE_SECONDS", str((cheap + dear) / 2))
    at = _page(model, "value_zeroing")
    assert any("over this server's limit" in c.value for c in at.caption)
    at = _explain(at)
    assert not at.exception and len(at.error) == 1
    message = at.error[0].value.replace("\\", "")
    assert f"Value-zeroing rollout on {ROWS} rows" in message and "would take" in message and "rows or fewer" in message
    offer = next(b for b in at.button if b.label.startswith("Use ") and b.label.endswith(" instead"))
    at = offer.click().run()
    method = at.selectbox(key="corpus_method").value
    assert method != "value_zeroing" and _sum(model, method) <= (cheap + dear) / 2
    at = _explain(at)
    assert not at.exception and not at.error, [e.value for e in at.error]
    assert at.get("plotly_chart"), "the cheaper method's run is on the page"


def test_a_visitor_runs_one_heavy_job_at_a_time_and_another_visitor_s_runs(tiny_model_dir: Callable[[str], Path],
                                                                         monkeypatch: pytest.MonkeyPatch):
    """Every run heavy here; visitor A holds a heavy slot elsewhere (another tab's job): A's corpus run waits with
    the queue's note and, after the wait, is refused with the one-at-a-time message; visitor B's run, with the
    other slot free, goes through."""
    model = tiny_model_dir("bert")
    monkeypatch.setenv("ROLLOUT_MAX_HEAVY_JOBS", "2")
    monkeypatch.setattr(budget, "_QUEUES", {})
    monkeypatch.setattr(budget, "HEAVY_SECONDS", 0.0)
    monkeypatch.setattr(budget, "heavy_slot", functools.partial(budget.heavy_slot, wait=1.0))
    notes: list[str] = []
    real_info = DeltaGenerator.info  # the queue's note is written into a placeholder: seen here, replaced later

    def info(self, body, *args, **kwargs):
        notes.append(str(body))
        return real_info(self, body, *args, **kwargs)

    monkeypatch.setattr(DeltaGenerator, "info", info)
    held, release = threading.Event(), threading.Event()

    def other_tab() -> None:
        with budget.heavy_slot(owner="visitor A", wait=5):
            held.set()
            release.wait(60)

    thread = threading.Thread(target=other_tab)
    thread.start()
    try:
        assert held.wait(5)
        monkeypatch.setattr(core, "visitor", lambda: "visitor A")
        at = _explain(_page(model, "rollout"))
        assert not at.exception
        assert [e.value for e in at.error] and "your other long computation" in at.error[0].value
        assert any(n.startswith("Waiting for a free slot") and "one at a time per visitor" in n for n in notes), notes
        monkeypatch.setattr(core, "visitor", lambda: "visitor B")
        at = _explain(_page(model, "rollout"))
        assert not at.exception and not at.error, [e.value for e in at.error]
        assert at.get("plotly_chart")
    finally:
        release.set()
        thread.join(10)


def test_a_stopped_run_says_so_and_keeps_nothing(tiny_model_dir: Callable[[str], Path],
                                                 monkeypatch: pytest.MonkeyPatch):
    """The Stop click's rerun: the run's request is among the session's stopped ones (what the button's callback
    records), so the page says it stopped and starts nothing."""
    model = tiny_model_dir("bert")
    at = _page(model, "rollout")
    at.session_state["corpus_request"] = "r1"
    at.session_state[core.STOPPED] = {"r1"}
    at = at.run()
    assert not at.exception and not at.error
    assert any(i.value.startswith("Stopped: the corpus run was stopped") for i in at.info)
    assert not at.get("plotly_chart")
