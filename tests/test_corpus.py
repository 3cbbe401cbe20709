"""Corpus engine: resumable chunks (each id once), aggregation vs a naive loop, reader errors."""
from __future__ import annotations

import pandas as pd
import pytest

from rollout_core.corpus.aggregate import class_tokens
from rollout_core.corpus.engine import read_results, run_local
from rollout_core.corpus.reader import read_corpus
from rollout_core.data.sentiment import generate
from rollout_core.errors import InputError


def _corpus(n: int) -> pd.DataFrame:
    rows = generate(n, seed=1)
    return pd.DataFrame({"id": [f"r{i}" for i in range(n)], "text": [r.text for r in rows],
                         "label": [r.label for r in rows]})


def test_resume_gives_each_id_once(tiny_handle, tmp_path):
    model = tiny_handle("bert")
    corpus = _corpus(20)
    run_local(model, corpus.iloc[:7], tmp_path, batch_size=4, chunk_rows=3, progress=lambda m: None)
    (tmp_path / ".chunk-000099.parquet.tmp").write_bytes(b"half a chunk")  # what a crash leaves
    run_local(model, corpus, tmp_path, batch_size=4, chunk_rows=3, progress=lambda m: None)
    ids = list(read_results(tmp_path)["id"])
    assert sorted(ids) == sorted(corpus["id"]) and len(ids) == len(set(ids))
    assert not list(tmp_path.glob("*.tmp"))


def test_aggregation_matches_naive_loop(tiny_handle, tmp_path):
    run_local(tiny_handle("bert"), _corpus(12), tmp_path, batch_size=5, progress=lambda m: None)
    results = read_results(tmp_path)
    naive: dict[tuple, list] = {}
    for _, row in results.iterrows():
        scores = list(row["scores"])
        best = scores.index(max(scores))
        for i, (w, s) in enumerate(zip(row["words"], scores)):
            naive.setdefault((row["prediction"], w.lower()), []).append((s, i == best))
    got = class_tokens(results).set_index(["prediction", "word"])
    assert len(got) == len(naive)
    for key, vals in naive.items():
        assert got.loc[key, "count"] == len(vals)
        assert got.loc[key, "mean_share"] == pytest.approx(sum(v for v, _ in vals) / len(vals))
        assert got.loc[key, "top1_share"] == pytest.approx(sum(t for _, t in vals) / len(vals))


def test_reader_errors(tmp_path):
    with pytest.raises(InputError):
        read_corpus(tmp_path / "missing.csv")
    bad = tmp_path / "x.csv"
    bad.write_text("a,b\n1,2\n")
    with pytest.raises(InputError, match="no 'text' column"):
        read_corpus(bad)
    good = tmp_path / "y.jsonl"
    good.write_text('{"text": "good", "label": "POSITIVE"}\n{"text": "bad"}\n')
    assert list(read_corpus(good)["id"]) == ["0", "1"]
