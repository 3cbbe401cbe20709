"""Ray engines give the local engines' results: corpus rows (200 generated sentences), evaluation frames, item by
item, with progress and Stop, and `corpus compare`'s figures to the bit (aligned slices and hash buckets, over a run
made locally and one made on Ray).

One local Ray with 2 CPUs is started for the module, inside the test process (the issue's set-up); its workers
run at normal priority (Ray's default is nice 15, which starves them next to the test process on 2 cores).
"""
from __future__ import annotations

import pandas as pd
import pytest

from rollout_core import cancel
from rollout_core.corpus import compare_runs as cr
from rollout_core.corpus.engine import read_results, run_corpus
from rollout_core.data.sentiment import generate
from rollout_core.faithfulness.evaluate import evaluate_dataset

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]  # Ray start-up and two actors: minutes under load


def _corpus(n: int) -> pd.DataFrame:
    rows = generate(n, seed=2)
    return pd.DataFrame({"id": [f"r{i}" for i in range(n)], "text": [r.text for r in rows],
                         "label": [r.label for r in rows]})


def _plain(value: object) -> object:
    """A Parquet list cell (a numpy array) as a Python list; other cells as they are."""
    return value.tolist() if hasattr(value, "tolist") else value


def test_ray_corpus_rows_equal_local_rows(local_ray: None, tiny_model_dir, tiny_handle, tmp_path) -> None:
    corpus = _corpus(200)
    run_corpus(tiny_handle("bert"), corpus, tmp_path / "local", batch_size=16, progress=lambda done, total: None)
    run_corpus(str(tiny_model_dir("bert")), corpus, tmp_path / "ray", batch_size=16, workers=2, engine="ray",
               progress=lambda done, total: None)
    local = read_results(tmp_path / "local").set_index("id").sort_index()
    remote = read_results(tmp_path / "ray").set_index("id").sort_index()
    assert list(local.index) == sorted(corpus["id"]) == list(remote.index)
    for column in ("kind", "text", "label", "prediction", "top_words", "words", "starts", "ends"):
        assert list(local[column].map(_plain)) == list(remote[column].map(_plain)), column
    for column in ("probability", "top_shares", "scores"):
        for a, b in zip(local[column].map(_plain), remote[column].map(_plain)):
            assert a == pytest.approx(b, abs=1e-5), column


def test_evaluate_on_ray_equals_local(local_ray: None, tiny_model_dir, tmp_path) -> None:
    source = tmp_path / "eval.csv"
    _corpus(6).to_csv(source, index=False)
    model = str(tiny_model_dir("bert"))
    local = evaluate_dataset(model, str(source), ["rollout", "attention"], agreement=False)
    remote = evaluate_dataset(model, str(source), ["rollout", "attention"], agreement=False, engine="ray",
                              workers=2)
    pd.testing.assert_frame_equal(local.per_example, remote.per_example)
    pd.testing.assert_frame_equal(local.summary, remote.summary)


def test_ray_reports_each_item_and_stops_between_them(local_ray: None, tiny_model_dir, tmp_path) -> None:
    """Per-item progress and Stop on Ray as on threads: the evaluation's examples one by one, the corpus's batches
    one by one; a stop asked after the first example keeps that example alone."""
    source = tmp_path / "eval.csv"
    _corpus(5).to_csv(source, index=False)
    model = str(tiny_model_dir("bert"))
    calls: list[tuple[int, int]] = []
    evaluate_dataset(model, str(source), ["rollout"], agreement=False, engine="ray", workers=2,
                     progress=lambda done, total: calls.append((done, total)))
    assert calls == [(i, 5) for i in range(6)]

    calls.clear()
    kept: list[dict] = []
    with cancel.cancellable(lambda: len(calls) >= 2):
        with pytest.raises(cancel.Cancelled):
            evaluate_dataset(model, str(source), ["rollout"], agreement=False, engine="ray", workers=2, collect=kept,
                             progress=lambda done, total: calls.append((done, total)))
    assert calls == [(0, 5), (1, 5)] and {row["example"] for row in kept} == {0}

    seen: list[tuple[int, int]] = []
    run_corpus(model, _corpus(40), tmp_path / "corpus", batch_size=8, workers=2, engine="ray",
               progress=lambda done, total: seen.append((done, total)))
    assert seen == [(8 * i, 40) for i in range(1, 6)]
    assert len(read_results(tmp_path / "corpus")) == 40


def test_corpus_compare_on_ray_gives_the_local_figures(local_ray: None, tiny_handle, tiny_model_dir, tmp_path,
                                                       monkeypatch) -> None:
    rows = generate(80, seed=6)
    corpus = pd.DataFrame({"id": [f"r{i}" for i in range(80)], "text": [r.text for r in rows],
                           "label": [r.label for r in rows]})
    quiet = lambda done, total: None  # noqa: E731
    a = run_corpus(tiny_handle("bert"), corpus, tmp_path / "a", progress=quiet).out
    b = run_corpus(str(tiny_model_dir("roberta")), corpus.iloc[::-1], tmp_path / "b", chunk_rows=13, workers=2,
                   engine="ray", progress=quiet).out  # made on Ray, stored in another order
    monkeypatch.setattr(cr, "ITEM_ROWS", 16)  # several items, so the Ray work really is split
    for other in (a, b):  # a with itself: aligned slices; b stored in another order: hash buckets
        local = cr.compare_runs(a, other, replicates=100)
        remote = cr.compare_runs(a, other, replicates=100, engine="ray", workers=2, scratch=tmp_path)
        for name in ("examples", "classes", "units", "moved", "top_lists"):
            pd.testing.assert_frame_equal(getattr(local, name), getattr(remote, name), check_exact=True)
        assert local.summary == remote.summary
        for kind, frame in local.disagreements.items():
            assert list(frame["id"]) == list(remote.disagreements[kind]["id"])
