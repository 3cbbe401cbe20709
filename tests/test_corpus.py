"""Corpus engine: resumable chunks (each id once), aggregation vs a naive loop, reader errors."""
from __future__ import annotations

import pandas as pd
import pytest

from rollout_core.corpus.aggregate import class_tokens
from rollout_core.corpus.engine import read_results, run_corpus
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
    run_corpus(model, corpus.iloc[:7], tmp_path, batch_size=4, chunk_rows=3, progress=lambda done, total: None)
    (tmp_path / ".chunk-000099.parquet.tmp").write_bytes(b"half a chunk")  # what a crash leaves
    run_corpus(model, corpus, tmp_path, batch_size=4, chunk_rows=3, progress=lambda done, total: None)
    ids = list(read_results(tmp_path)["id"])
    assert sorted(ids) == sorted(corpus["id"]) and len(ids) == len(set(ids))
    assert not list(tmp_path.glob("*.tmp"))


def test_aggregation_matches_naive_loop(tiny_handle, tmp_path):
    run_corpus(tiny_handle("bert"), _corpus(12), tmp_path, batch_size=5, progress=lambda done, total: None)
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


def test_top_words_are_the_largest_shares(tiny_handle, tmp_path):
    run_corpus(tiny_handle("bert"), _corpus(6), tmp_path, batch_size=4, top_k=3, progress=lambda done, total: None)
    for _, row in read_results(tmp_path).iterrows():
        ranked = sorted(zip(row["scores"], row["words"]), key=lambda p: -p[0])[:3]
        assert list(row["top_shares"]) == pytest.approx([s for s, _ in ranked])
        assert list(row["top_words"]) == [w for _, w in ranked]
        assert 0.0 < row["probability"] <= 1.0 and row["kind"] == "text"


def test_progress_reports_every_batch(tiny_handle, tmp_path):
    seen: list[tuple[int, int]] = []
    run_corpus(tiny_handle("bert"), _corpus(10), tmp_path, batch_size=4, chunk_rows=6,
              progress=lambda done, total: seen.append((done, total)))
    assert seen == [(4, 10), (6, 10), (10, 10)]  # batches inside chunks of 6: 4+2, then 4


def test_rerun_with_other_settings_is_refused(tiny_handle, tmp_path):
    run_corpus(tiny_handle("bert"), _corpus(4), tmp_path, batch_size=4, progress=lambda done, total: None)
    with pytest.raises(InputError, match="method 'rollout' \\(now 'attention'\\)"):
        run_corpus(tiny_handle("bert"), _corpus(4), tmp_path, method="attention", progress=lambda done, total: None)


def test_saved_dataset_folder_with_class_labels(tmp_path):
    import json

    import pyarrow as pa
    import pyarrow.ipc as ipc

    table = pa.table({"text": ["good food", "cold soup", "fine"], "label": [1, 0, 1]})
    with ipc.new_stream(tmp_path / "data-00000-of-00001.arrow", table.schema) as writer:
        writer.write_table(table)
    features = {"text": {"dtype": "string", "_type": "Value"},
                "label": {"names": ["NEGATIVE", "POSITIVE"], "_type": "ClassLabel"}}
    (tmp_path / "dataset_info.json").write_text(json.dumps({"features": features}))
    rows = read_corpus(tmp_path, limit=2)
    assert list(rows["text"]) == ["good food", "cold soup"]
    assert list(rows["label"]) == ["POSITIVE", "NEGATIVE"]


def test_image_folder_tree(tiny_handle, tmp_path):
    from PIL import Image

    for label, colour in (("red", (255, 0, 0)), ("blue", (0, 0, 255))):
        (tmp_path / "imgs" / label).mkdir(parents=True)
        for i in range(2):
            Image.new("RGB", (40, 40), colour).save(tmp_path / "imgs" / label / f"{i}.png")
    rows = read_corpus(tmp_path / "imgs")
    assert list(rows["id"]) == ["blue/0.png", "blue/1.png", "red/0.png", "red/1.png"]
    assert list(rows["label"]) == ["blue", "blue", "red", "red"]
    run_corpus(tiny_handle("vit"), rows, tmp_path / "out", batch_size=3, progress=lambda done, total: None)
    out = read_results(tmp_path / "out")
    assert sorted(out["id"]) == sorted(rows["id"]) and set(out["kind"]) == {"image"}
    for _, row in out.iterrows():
        assert sum(row["scores"]) == pytest.approx(1.0, abs=1e-4)
        assert all(w.startswith("patch") for w in row["words"])


@pytest.mark.slow
def test_cli_progress_and_errors(tiny_model_dir, tmp_path):
    import subprocess
    import sys

    source = tmp_path / "in.csv"
    _corpus(8).to_csv(source, index=False)
    cmd = [sys.executable, "-m", "rollout_core", "corpus", "--data", str(source), "--out", str(tmp_path / "o"),
           "--model", str(tiny_model_dir("bert")), "--batch-size", "4", "--limit", "5"]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert "holds 5 rows (5 written by this run)" in done.stdout and "row/s" in done.stderr and "5/5" in done.stderr
    bad = subprocess.run([*cmd[:5], str(tmp_path / "missing.csv"), *cmd[6:]], capture_output=True, text=True,
                         timeout=300)
    assert bad.returncode != 0 and "no such corpus file" in bad.stderr and "Traceback" not in bad.stderr
