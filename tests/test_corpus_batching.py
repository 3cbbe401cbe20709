"""Corpus batching: rows equal the one-by-one explain_text reference in input order, batches of similar lengths
pad little, worker threads run with one torch thread each and leave torch's thread count as it was."""
from __future__ import annotations

import pandas as pd
import pytest
import torch

from rollout_core import explain_text
from rollout_core.compare import word_scores
from rollout_core.corpus import engine
from rollout_core.corpus.engine import read_results, run_corpus
from rollout_core.data.sentiment import generate

QUIET = lambda done, total: None  # noqa: E731


def _corpus(n: int) -> pd.DataFrame:
    """Generated sentences of mixed lengths, a few long ones among them so that sorting reorders the rows."""
    texts = [r.text for r in generate(n, seed=3)]
    texts = [t + " and it went on" * (i % 4) for i, t in enumerate(texts)]
    return pd.DataFrame({"id": [f"r{i}" for i in range(n)], "text": texts, "label": [None] * n})


def test_rows_equal_explain_text_one_by_one_in_input_order(tiny_handle, tmp_path):
    model = tiny_handle("bert")
    corpus = _corpus(11)
    run_corpus(model, corpus, tmp_path, batch_size=4, chunk_rows=7, progress=QUIET)  # 2 workers
    rows = read_results(tmp_path)
    assert list(rows["id"]) == list(corpus["id"])
    for text, (_, row) in zip(corpus["text"], rows.iterrows()):
        expl = explain_text(model, text, method="rollout")
        units = word_scores(expl)
        assert list(row["words"]) == [w for w, _, _, _ in units]
        assert list(row["starts"]) == [s for _, s, _, _ in units] and list(row["ends"]) == [e for _, _, e, _ in units]
        assert list(row["scores"]) == pytest.approx([v for _, _, _, v in units], abs=1e-6)
        assert row["prediction"] == expl.prediction[0].label
        assert row["probability"] == pytest.approx(expl.prediction[0].probability, abs=1e-6)


def test_batches_hold_similar_lengths(tiny_handle, tmp_path, monkeypatch):
    model = tiny_handle("bert")
    corpus = _corpus(24)
    count = {t: len(explain_text(model, t, method="rollout").tokens) for t in corpus["text"]}  # what the model saw
    padded: list[int] = []
    real = engine.explain_rows

    def spy(model_, rows, *args):
        lengths = [count[t] for t in rows["text"]]
        padded.append(max(lengths) * len(lengths))
        return real(model_, rows, *args)

    monkeypatch.setattr(engine, "explain_rows", spy)
    run_corpus(model, corpus, tmp_path, batch_size=6, chunk_rows=24, progress=QUIET)
    lengths = [count[t] for t in corpus["text"]]
    in_order = sum(max(lengths[i:i + 6]) * 6 for i in range(0, 24, 6))
    ranked = sorted(lengths)
    least = sum(max(ranked[i:i + 6]) * 6 for i in range(0, 24, 6))
    assert sum(padded) == least < in_order


def test_workers_use_one_torch_thread_each_and_restore_the_count(tiny_handle, tmp_path, monkeypatch):
    model = tiny_handle("bert")
    seen: list[int] = []
    real = engine.explain_rows

    def spy(*args):
        seen.append(torch.get_num_threads())
        return real(*args)

    monkeypatch.setattr(engine, "explain_rows", spy)
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        run_corpus(model, _corpus(8), tmp_path, batch_size=2, workers=2, progress=QUIET)
        assert seen == [1, 1, 1, 1] and torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(before)
