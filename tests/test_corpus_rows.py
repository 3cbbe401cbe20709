"""The corpus engine's text rows come straight from each batch's tensors (`explain.text_batches`), without
Explanation objects; they must hold exactly the values the Explanations of `explain_texts` give for the same
batches (padding, mixed lengths; several methods and families; int8), and match `explain_text` one by one."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from rollout_core import explain_text
from rollout_core.compare import word_scores
from rollout_core.corpus import engine
from rollout_core.corpus.engine import at_precision, explain_rows
from rollout_core.data.sentiment import generate
from rollout_core.errors import InputError
from rollout_core.explain import explain_texts, text_batches


def _corpus(n: int) -> pd.DataFrame:
    """Generated sentences of mixed lengths (batches pad), one of them truncated by the model's limit."""
    texts = [t.text + " and it went on" * (i % 5) for i, t in enumerate(generate(n, seed=7))]
    texts[3] = " ".join([texts[3]] * 40)
    return pd.DataFrame({"id": [f"r{i}" for i in range(n)], "text": texts, "label": ["x"] * n})


def _f32(value: float) -> float:
    return float(np.float32(value))


def _assert_rows_equal_explanations(model: object, method: str, top_k: int = 3) -> None:
    """Every column of `explain_rows` equals the value taken from `explain_texts`' Explanation of the row."""
    rows = _corpus(10)
    table = explain_rows(model, rows, method, batch_size=4, top_k=top_k).to_pylist()
    expls = explain_texts(model, list(rows["text"]), method=method, batch_size=4)
    assert len(table) == len(expls) == len(rows)
    # before the float32 of the Parquet columns: the float64 word shares and predictions themselves
    assert list(engine._units(model, rows, method, 4)) == [(e.prediction, word_scores(e)) for e in expls]
    for row, expl, text in zip(table, expls, rows["text"]):
        units = word_scores(expl)
        best = sorted(range(len(units)), key=lambda i: -units[i][3])[:top_k]
        assert row["text"] == text and row["kind"] == "text" and row["label"] == "x"
        assert row["words"] == [u[0] for u in units]
        assert row["starts"] == [u[1] for u in units] and row["ends"] == [u[2] for u in units]
        assert row["scores"] == [_f32(u[3]) for u in units]  # the schema stores float32
        assert row["top_shares"] == [_f32(units[i][3]) for i in best]
        assert row["top_words"] == [units[i][0] for i in best]
        prediction = expl.prediction[0] if expl.prediction else None
        assert row["prediction"] == (prediction.label if prediction else None)
        if prediction is not None:
            assert row["probability"] == _f32(prediction.probability)


@pytest.mark.parametrize("method", ["rollout", "attention", "sink_free", "flow"])
def test_rows_equal_the_explanations_of_the_same_batches(tiny_handle, method):
    _assert_rows_equal_explanations(tiny_handle("bert"), method)


@pytest.mark.parametrize("kind", ["roberta", "gpt2", "sentence", "t5"])
def test_rows_equal_the_explanations_for_other_families(tiny_handle, kind):
    _assert_rows_equal_explanations(tiny_handle(kind), "rollout")


def test_int8_rows_equal_the_int8_explanations(tiny_handle):
    _assert_rows_equal_explanations(at_precision(tiny_handle("bert"), "int8"), "rollout")


def test_rows_match_explain_text_one_by_one(tiny_handle):
    model = tiny_handle("bert")
    rows = _corpus(6)
    for row, text in zip(explain_rows(model, rows, "rollout", batch_size=6).to_pylist(), rows["text"]):
        units = word_scores(explain_text(model, text, method="rollout"))
        assert row["words"] == [u[0] for u in units]
        assert row["scores"] == pytest.approx([u[3] for u in units], abs=1e-6)


def test_text_batches_refuses_encoder_decoder_models(tiny_handle):
    with pytest.raises(InputError, match="encoder-decoder"):
        text_batches(tiny_handle("t5"), ["a cat sat"], method="rollout")
