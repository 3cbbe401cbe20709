"""Issue 30: corpus folders that cannot lose or double a row, cells that cannot block a run, and every user error
of the corpus command as one line with exit status 2. (The kill / delete / corrupt / two-writers run is
tests/test_corpus_ray_page.py::test_killed_run_resumes_each_id_once.)"""
from __future__ import annotations

import contextlib
import json
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from streamlit.testing.v1 import AppTest

from cli_driver import ROOT, assert_one_error_line, cli_env, run_cli_cases
from rollout_core.corpus import folder as result_folder
from rollout_core.corpus.cells import MAX_TEXT_CHARS
from rollout_core.corpus.engine import read_results, run_corpus
from rollout_core.data.sentiment import generate
from rollout_core.errors import InputError
from rollout_core.models.loading import load_model

QUIET = lambda done, total: None  # noqa: E731


def _corpus(n: int, prefix: str = "r") -> pd.DataFrame:
    rows = generate(n, seed=4)
    return pd.DataFrame({"id": [f"{prefix}{i}" for i in range(n)], "text": [r.text for r in rows],
                         "label": [r.label for r in rows]})


def _chunks(out: Path) -> list[Path]:
    return sorted(out.glob("chunk-*.parquet"))


@pytest.mark.slow
def test_cells_that_cannot_be_explained_are_skipped_named_and_listed(tiny_model_dir, tmp_path):
    """An empty cell used to stop the whole corpus ("the text must be a string, not float", no row named, on
    every rerun); a huge cell was tokenised whole (8 MB: 15 s, 1.76 GB)."""
    good = _corpus(6)
    huge = "a good film " * (3 * MAX_TEXT_CHARS // 12)  # 300,000 characters
    table = tmp_path / "cells.csv"
    pd.DataFrame({"id": [*good["id"], "empty", "blank", "number", "huge"],
                  "text": [*good["text"], None, "   ", "42", huge]}).to_csv(table, index=False)
    lines = tmp_path / "cells.jsonl"
    lines.write_text('{"id": "n", "text": 5}\n{"id": "ok", "text": "fine food"}\n{"id": "z", "text": null}\n'
                     '{"id": "gone"}\n{"id": "list", "text": ["a", "b"]}\n')
    bert = str(tiny_model_dir("bert"))
    runs = run_cli_cases([(["corpus", "--data", str(table), "--out", str(tmp_path / "csv"), "--model", bert], None),
                          (["corpus", "--data", str(lines), "--out", str(tmp_path / "jsonl"), "--model", bert], None)],
                         tmp_path / "cases", warm=[Path(bert)])
    csv, jsonl = runs
    assert csv.status == 0 and "Traceback" not in csv.stderr, csv.stderr[-2000:]
    assert f"{tmp_path / 'csv'} holds 8 rows (8 written by this run)" in csv.stdout
    assert "2 rows skipped (missing: 1, empty: 1; ids empty, blank)" in csv.stdout
    assert f"1 text longer than {MAX_TEXT_CHARS:,} characters cut there before tokenising (ids huge)" in csv.stdout
    assert pd.read_csv(tmp_path / "csv" / "skipped.csv").to_dict("list") == {"id": ["empty", "blank"],
                                                                             "reason": ["missing", "empty"]}
    rows = read_results(tmp_path / "csv").set_index("id")
    assert rows.loc["number", "text"] == "42"  # a CSV cell is text, also when it looks like a number
    assert len(rows.loc["huge", "text"]) == MAX_TEXT_CHARS
    assert jsonl.status == 0, jsonl.stderr[-2000:]
    assert "4 rows skipped (missing: 2, not text (int): 1, not text (list): 1; ids n, z, gone, list)" in jsonl.stdout
    assert list(read_results(tmp_path / "jsonl")["id"]) == ["ok"]


@pytest.mark.slow
def test_every_user_error_of_the_corpus_command_is_one_line(tiny_handle, tiny_model_dir, tmp_path):
    """A damaged, empty or foreign chunk and --out naming a file were reported as internal errors (exit 1)."""
    made = {}
    for name in ("damaged", "empty", "foreign", "missing", "journal"):
        made[name] = run_corpus(tiny_handle("bert"), _corpus(8), tmp_path / name, chunk_rows=4, progress=QUIET).out
    first = _chunks(made["damaged"])[0]
    first.write_bytes(first.read_bytes()[:-9] + b"x" * 9)  # same size, other bytes
    _chunks(made["empty"])[0].write_bytes(b"")
    shutil.copy(_chunks(made["foreign"])[0], made["foreign"] / "chunk-000777.parquet")
    _chunks(made["missing"])[1].unlink()
    with open(made["journal"] / result_folder.JOURNAL, "r+b") as journal:
        journal.seek(3)
        journal.write(b"#")  # a damaged first line
    source = tmp_path / "in.csv"
    _corpus(8).to_csv(source, index=False)
    a_file = tmp_path / "a-file"
    a_file.write_text("not a folder")
    bert = str(tiny_model_dir("bert"))
    run = ["corpus", "--data", str(source), "--model", bert, "--chunk-rows", "4", "--out"]
    cases = [(run + [str(a_file)], "is a file, not a folder"),
             (run + [str(made["foreign"])], "chunk-000777.parquet is not a chunk this folder's journal.jsonl records"),
             (run + [str(made["journal"])], "journal.jsonl is damaged at line 1"),
             (["corpus", "summary", str(made["damaged"])], "chunk-000000.parquet is missing or damaged"),
             (["corpus", "summary", str(made["empty"])], "chunk-000000.parquet is missing or damaged"),
             (["corpus", "summary", str(made["missing"])], "chunk-000001.parquet is missing or damaged"),
             (["corpus", "summary", str(tmp_path / "nowhere")], "is not a result folder")]
    results = run_cli_cases([(argv, None) for argv, _ in cases], tmp_path / "cases", warm=[Path(bert)])
    for (_, fragment), result in zip(cases, results):
        assert_one_error_line(result, fragment)
    assert a_file.read_text() == "not a folder" and len(_chunks(made["foreign"])) == 3  # nothing was changed
    # the damaged, empty and missing chunks are not errors for a rerun: it explains their rows again, and says so
    for name, why in (("damaged", "damaged"), ("empty", "damaged"), ("missing", "missing")):
        report = run_corpus(tiny_handle("bert"), _corpus(8), made[name], chunk_rows=4, progress=QUIET)
        assert [(lost.why, lost.rows) for lost in report.lost] == [(why, 4)] and report.written == 4
        assert sorted(read_results(made[name])["id"]) == sorted(_corpus(8)["id"])


def test_chunk_names_are_never_reused(tiny_handle, tmp_path):
    """The next chunk was numbered by the count of chunks: after a deletion a resume overwrote the last chunk."""
    corpus = _corpus(12)
    run_corpus(tiny_handle("bert"), corpus, tmp_path, chunk_rows=4, progress=QUIET)
    names = [p.name for p in _chunks(tmp_path)]
    (tmp_path / names[0]).unlink()
    last = (tmp_path / names[-1]).read_bytes()
    report = run_corpus(tiny_handle("bert"), corpus, tmp_path, chunk_rows=4, progress=QUIET)
    assert (tmp_path / names[-1]).read_bytes() == last  # untouched
    assert report.held == 12 and [p.name for p in _chunks(tmp_path)] == [*names[1:], "chunk-000003.parquet"]
    assert sorted(read_results(tmp_path)["id"]) == sorted(corpus["id"])


def test_a_lock_of_another_host_is_not_taken_over(tiny_handle, tmp_path):
    run_corpus(tiny_handle("bert"), _corpus(4), tmp_path, progress=QUIET)
    (tmp_path / result_folder.LOCK).write_text(json.dumps({"pid": 4242, "host": "elsewhere", "started": "then"}))
    with pytest.raises(InputError, match=r"a corpus run on host elsewhere \(pid 4242 on elsewhere, started then\) "
                                         r"holds .*; if it is no longer running, remove .*\.lock"):
        run_corpus(tiny_handle("bert"), _corpus(8), tmp_path, progress=QUIET)
    ours = {"pid": 999_999_999, "host": socket.gethostname(), "started": "then"}  # no such process holds it
    (tmp_path / result_folder.LOCK).write_text(json.dumps(ours))
    assert run_corpus(tiny_handle("bert"), _corpus(8), tmp_path, progress=QUIET).held == 8
    assert not (tmp_path / result_folder.LOCK).exists()


def _full_disk(folder: Path) -> tuple[str, object]:
    """A small file system at `folder` (tmpfs, when this process may mount one), else a file-size limit for the
    child: either way writes fail as on a full disk."""
    folder.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(folder)], capture_output=True)
    if mounted.returncode == 0:
        return "tmpfs", None

    def limit() -> None:
        import resource

        resource.setrlimit(resource.RLIMIT_FSIZE, (40_000, 40_000))

    return "rlimit", limit


@pytest.mark.slow
def test_a_full_disk_is_one_line_and_the_folder_keeps_whole_chunks(tiny_model_dir, tmp_path):
    source = tmp_path / "in.csv"
    rng = np.random.default_rng(0)
    letters = np.array(list("abcdefghijklmnopqrstuvwxyz       "))
    corpus = _corpus(240)  # the last 120 texts are 3,000 random letters: chunks of 40 of them hold ~90 KB
    corpus.loc[120:, "text"] = ["".join(rng.choice(letters, 3000)) for _ in range(120)]
    corpus.to_csv(source, index=False)
    out = tmp_path / "disk" / "run"
    how, limit = _full_disk(tmp_path / "disk")
    argv = [sys.executable, "-m", "rollout_core", "corpus", "--data", str(source), "--out", str(out),
            "--model", str(tiny_model_dir("bert")), "--chunk-rows", "40", "--batch-size", "40"]
    try:
        full = subprocess.run(argv, capture_output=True, text=True, env=cli_env(), cwd=ROOT, timeout=300,
                              preexec_fn=limit)
        lines = full.stderr.strip().splitlines()
        assert full.returncode == 2 and lines[-1].startswith(f"error: cannot write to {out}: "), (how, full.stderr)
        assert "make room and rerun the same command" in lines[-1] and "Traceback" not in full.stderr
        kept = read_results(out)  # every chunk it keeps is whole and recorded
        assert 0 < len(kept) < len(corpus) and kept["id"].is_unique, how
        assert f"it keeps its {len(_chunks(out))} whole chunks ({len(kept)} rows)" in lines[-1]
        assert not list(out.glob(".chunk-*")) and not (out / result_folder.LOCK).exists()
        if how == "tmpfs":
            filler = tmp_path / "disk" / "filler"
            with open(filler, "wb", buffering=0) as out_file, contextlib.suppress(OSError):
                while True:  # the rest of the disk, so that not even the lock fits
                    out_file.write(b"x" * 4096)
            with pytest.raises(InputError, match=r"cannot write to .*: the disk is full"):
                run_corpus(load_model(str(tiny_model_dir("bert"))), corpus, tmp_path / "disk" / "new", progress=QUIET)
            filler.unlink()
            subprocess.run(["mount", "-o", "remount,size=16m", str(tmp_path / "disk")], check=True)
        again = subprocess.run(argv, capture_output=True, text=True, env=cli_env(), cwd=ROOT, timeout=300)
        assert again.returncode == 0, again.stderr
        assert f"holds 240 rows ({len(corpus) - len(kept)} written by this run)" in again.stdout
        assert sorted(read_results(out)["id"]) == sorted(corpus["id"])
    finally:
        if how == "tmpfs":
            subprocess.run(["umount", str(tmp_path / "disk")], check=False)


def test_the_page_skips_and_names_empty_cells(tiny_model_dir, tmp_path):
    table = _corpus(5).assign(text=lambda f: [*f["text"][:3], "", "  "])
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=120)
    at.query_params["model"] = str(tiny_model_dir("bert"))
    at.query_params["source"] = "Uploaded CSV"
    at.switch_page("app_pages/corpus.py").run()
    at.file_uploader[0].set_value(("rows.csv", table.to_csv(index=False).encode(), "text/csv")).run()
    next(b for b in at.button if b.label == "Explain").click().run()
    assert not at.exception and not at.error, [str(e.value) for e in [*at.exception, *at.error]]
    notes = [str(i.value).replace("\\", "") for i in at.info]  # as shown: Markdown escapes resolved
    assert any("2 rows skipped (missing: 1, empty: 1; ids 3, 4)" in n for n in notes), notes
    assert at.get("plotly_chart")

