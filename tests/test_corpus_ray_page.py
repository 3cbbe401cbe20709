"""Corpus: a killed run resumed gives each id once; the page via AppTest (Ray: tests/test_ray_engines.py)."""
from __future__ import annotations

import html
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest
from streamlit.testing.v1 import AppTest

from rollout_core import cli
from rollout_core.corpus.engine import read_results, run_corpus
from rollout_core.data.sentiment import generate
from rollout_core.models.loading import load_model

ROOT = Path(__file__).resolve().parents[1]


def _corpus(n: int) -> pd.DataFrame:
    rows = generate(n, seed=2)
    return pd.DataFrame({"id": [f"r{i}" for i in range(n)], "text": [r.text for r in rows],
                         "label": [r.label for r in rows]})


@pytest.mark.slow
def test_killed_run_resumes_each_id_once(tiny_model_dir, tmp_path, capsys):
    """A run killed mid-way, a second writer started beside it, a chunk deleted and another corrupted: the rerun
    ends with each id once and says what it explained again (issue 30: a deleted chunk was lost for good, the
    resume overwrote the last chunk, two writers gave 2140 rows for 2000 ids, and every rerun said "wrote 2000")."""
    corpus = _corpus(800)  # enough rows that the run cannot finish before it is killed
    source = tmp_path / "in.csv"
    corpus.to_csv(source, index=False)
    out = tmp_path / "out"
    run = ["corpus", "--data", str(source), "--out", str(out), "--model", str(tiny_model_dir("bert"))]
    env = dict(os.environ, PYTHONPATH=str(ROOT), OMP_NUM_THREADS="1")
    proc = subprocess.Popen([sys.executable, "-m", "rollout_core", *run, "--batch-size", "2", "--chunk-rows", "4"],
                            cwd=ROOT, env=env, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 90
    while len(list(out.glob("chunk-*.parquet"))) < 2 and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.01)
    assert proc.poll() is None, "the run ended before it could be killed"
    with pytest.raises(SystemExit) as second:  # a second writer, other chunk size, while the first runs
        cli.main([*run, "--chunk-rows", "7"])
    told = capsys.readouterr().err.strip().splitlines()
    assert second.value.code == 2 and len(told) == 1, told
    assert told[0].startswith(f"error: another corpus run (pid {proc.pid} on {socket.gethostname()}, started ")
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert json.loads((out / ".lock").read_text())["pid"] == proc.pid  # left behind: taken over by the rerun
    chunks = sorted(out.glob("chunk-*.parquet"))
    # the rows of the chunk files there (read_results may refuse the folder: a kill between a chunk's journal line
    # and its final name leaves that chunk recorded but not linked, which the rerun explains again)
    kept = pd.concat([pd.read_parquet(chunk, columns=["id"]) for chunk in chunks])
    assert len(kept) < len(corpus) and kept["id"].is_unique  # it really was killed mid-run, the writer refused
    chunks[0].unlink()
    damaged = chunks[1].read_bytes()
    chunks[1].write_bytes(damaged[:100] + bytes(b ^ 0xFF for b in damaged[100:110]) + damaged[110:])
    again = subprocess.run([sys.executable, "-m", "rollout_core", *run, "--batch-size", "32", "--chunk-rows", "64"],
                           cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert again.returncode == 0, again.stderr[-2000:]
    report = again.stdout.splitlines()
    assert report[0] == f"{out} holds {len(corpus)} rows ({len(corpus) - len(kept) + 8} written by this run)", report
    assert f"{chunks[0].name} was missing: its 4 rows were explained again" in report
    assert f"{chunks[1].name} was damaged: its 4 rows were explained again" in report
    ids = list(read_results(out)["id"])
    assert sorted(ids) == sorted(corpus["id"]) and len(ids) == len(set(ids))
    assert not (out / ".lock").exists() and (out / f"{chunks[1].name}.damaged").read_bytes() != damaged


def test_page_shows_result_folder(tiny_handle, tmp_path, monkeypatch):
    corpus = _corpus(30)
    corpus.loc[0, "text"] = "<img src=x onerror=alert(1)> was rude"
    run_corpus(tiny_handle("bert"), corpus, tmp_path / "run-1", batch_size=8, progress=lambda done, total: None)
    (tmp_path / "not-a-result").mkdir()
    monkeypatch.setenv("ROLLOUT_CORPUS_DIR", str(tmp_path))
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=120).switch_page("app_pages/corpus.py").run()
    at.radio[0].set_value("Result folder").run()
    assert not at.exception, [str(e.value) for e in at.exception]
    picker = next(s for s in at.selectbox if s.label == "Result folder")
    assert picker.options == ["run-1"]  # only result folders inside ROLLOUT_CORPUS_DIR, no typed paths
    assert not [t for t in at.text_input if "folder" in t.label.lower() and "hub" not in t.label.lower()]
    assert at.get("plotly_chart")
    html = "".join(str(m.value) for m in at.markdown)
    assert "<img" not in html


def test_chart_titles_show_class_names_as_written(tiny_model_dir, tmp_path, monkeypatch):
    """Issue 30: the chart title showed Markdown escapes (`bad \\(1\\*\\)`); Plotly reads HTML, not Markdown."""
    folder = Path(shutil.copytree(tiny_model_dir("bert"), tmp_path / "model"))
    config = json.loads((folder / "config.json").read_text())
    names = ["bad (1*) [x]", "a<b>c</b> & d", "ok|fine ~ $5 !"]
    config["id2label"] = dict(enumerate(names))
    config["label2id"] = {name: i for i, name in enumerate(names)}
    (folder / "config.json").write_text(json.dumps(config))
    runs = tmp_path / "runs"
    run_corpus(load_model(str(folder)), _corpus(30), runs / "run-1", batch_size=8, progress=lambda done, total: None)
    monkeypatch.setenv("ROLLOUT_CORPUS_DIR", str(runs))
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=120).switch_page("app_pages/corpus.py").run()
    at.radio[0].set_value("Result folder").run()
    assert not at.exception, [str(e.value) for e in at.exception]
    shown = next(s for s in at.selectbox if s.label == "Predicted class").value
    title = json.loads(at.get("plotly_chart")[0].proto.spec)["layout"]["title"]["text"]
    assert "\\" not in title
    assert title.startswith(f"Words the model leans on for {html.escape(shown, quote=False)} (seen at least")
