"""Corpus: a killed run resumed gives each id once; the page via AppTest (Ray: tests/test_ray_engines.py)."""
from __future__ import annotations

import html
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
from streamlit.testing.v1 import AppTest

from rollout_core.corpus.engine import read_results, run_corpus
from rollout_core.data.sentiment import generate
from rollout_core.models.loading import load_model

ROOT = Path(__file__).resolve().parents[1]


def _corpus(n: int) -> pd.DataFrame:
    rows = generate(n, seed=2)
    return pd.DataFrame({"id": [f"r{i}" for i in range(n)], "text": [r.text for r in rows],
                         "label": [r.label for r in rows]})


def test_killed_run_resumes_each_id_once(tiny_model_dir, tmp_path):
    corpus = _corpus(400)  # enough rows that the run cannot finish between two looks at its folder
    source = tmp_path / "in.csv"
    corpus.to_csv(source, index=False)
    out = tmp_path / "out"
    cmd = [sys.executable, "-m", "rollout_core", "corpus", "--data", str(source), "--out", str(out),
           "--model", str(tiny_model_dir("bert")), "--batch-size", "2", "--chunk-rows", "4"]
    env = dict(os.environ, PYTHONPATH=str(ROOT), OMP_NUM_THREADS="1")
    proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 90
    while not list(out.glob("chunk-*.parquet")) and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.01)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert len(read_results(out)) < len(corpus)  # it really was killed mid-run
    subprocess.run(cmd, cwd=ROOT, env=env, check=True, stderr=subprocess.DEVNULL, timeout=150)
    ids = list(read_results(out)["id"])
    assert sorted(ids) == sorted(corpus["id"]) and len(ids) == len(set(ids))


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
