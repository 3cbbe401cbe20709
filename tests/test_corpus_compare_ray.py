"""`corpus compare` on Ray gives the local figures to the bit (aligned slices and hash buckets), over a run made
locally and one made on Ray (the corpus command's `--engine ray`), on a local Ray with 2 CPUs started in the test
(tests/conftest.py `local_ray`)."""
from __future__ import annotations

import pandas as pd
import pytest

from rollout_core.corpus import compare_runs as cr
from rollout_core.corpus.engine import run_corpus
from rollout_core.data.sentiment import generate

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]  # Ray start-up and two actors: minutes under load

pytest.importorskip("ray")


@pytest.mark.slow
def test_ray_gives_the_local_figures(local_ray: None, tiny_handle, tiny_model_dir, tmp_path, monkeypatch) -> None:
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
