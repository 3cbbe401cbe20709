"""`corpus compare` end to end on tiny models: two methods, two tokenizers, image runs, against references computed
here row by row from the stored rows (or from `explain_*` + `rollout_core.compare`); the same figures whatever the
split of the work; the refusals; the CLI; the report's escaping."""
from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from PIL import Image

from cli_driver import assert_one_error_line, run_cli_cases
from rollout_core import compare
from rollout_core.corpus import compare_runs as cr
from rollout_core.corpus.compare_report import comparison_json, report_html
from rollout_core.corpus.comparison import CorpusComparison
from rollout_core.corpus.bootstrap import interval, poisson_weights, row_keys
from rollout_core.corpus.engine import read_results, run_corpus
from rollout_core.data import shapes
from rollout_core.data.sentiment import generate
from rollout_core.errors import InputError, RunsDiffer
from rollout_core.explain import explain_image, explain_text

N = 60
MARKUP = "<img src=x onerror=alert(1)> was rude."


def _quiet(done: int, total: int) -> None:
    pass


def _corpus(n: int = N) -> pd.DataFrame:
    rows = generate(n, seed=4)
    texts = [r.text for r in rows]
    texts[3] = MARKUP
    texts[5] = "It was great.\r\nReally e\u0301pic."  # CRLF and a combining accent: spans of the normalised text
    return pd.DataFrame({"id": [f"r{i}" for i in range(n)], "text": texts, "label": [r.label for r in rows]})


@pytest.fixture(scope="module")
def runs(tiny_handle, tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("compare-runs")
    corpus = _corpus()
    made = {}
    for name, kind, method, rows, chunk in (
            ("rollout", "bert", "rollout", corpus, 16), ("attention", "bert", "attention", corpus, 7),
            ("roberta", "roberta", "rollout", corpus, 16),
            ("attention_reversed", "bert", "attention", corpus.iloc[::-1], 11)):
        made[name] = run_corpus(tiny_handle(kind), rows, root / name, method=method, chunk_rows=chunk,
                                progress=_quiet).out
    return made


def _naive(a_dir: Path, b_dir: Path, k: int = 5) -> tuple[pd.DataFrame, dict]:
    """Per row (Spearman, top-k overlap, units) and per (A's predicted class, word) the occurrences' B - A, from
    whole frames with dictionaries and `rollout_core.compare`, one row at a time."""
    a = read_results(a_dir).set_index("id")
    b = read_results(b_dir).set_index("id")
    rows, moves = [], {}
    for row_id, ra in a.iterrows():
        rb = b.loc[row_id]
        spans_b = {(s, e): v for s, e, v in zip(rb["starts"], rb["ends"], rb["scores"])}
        common = [(w, s, e, va, spans_b[(s, e)]) for w, s, e, va in zip(ra["words"], ra["starts"], ra["ends"],
                                                                       ra["scores"]) if (s, e) in spans_b]
        va = np.array([c[3] for c in common], dtype=float)
        vb = np.array([c[4] for c in common], dtype=float)
        va, vb = va / va.sum(), vb / vb.sum()
        rho, _ = compare.spearman(va, vb)
        rows.append({"id": row_id, "spearman": rho, "top_k_overlap": compare.top_k_overlap(va, vb, k),
                     "units": len(common), "agree": ra["prediction"] == rb["prediction"]})
        for (word, *_), x, y in zip(common, va, vb):
            moves.setdefault((ra["prediction"], word.lower()), []).append(y - x)
    return pd.DataFrame(rows), moves


@pytest.mark.parametrize("b_name", ["attention", "roberta"])
def test_figures_equal_a_row_by_row_reference(runs, b_name: str) -> None:
    result = cr.compare_runs(runs["rollout"], runs[b_name], min_count=1, top=1000)
    naive, moves = _naive(runs["rollout"], runs[b_name])
    got = result.examples
    assert list(got["id"]) == list(_corpus()["id"])  # A's stored order
    assert np.allclose(got["spearman"], naive["spearman"], atol=1e-9, equal_nan=True)
    assert np.allclose(got["top_k_overlap"], naive["top_k_overlap"], equal_nan=True)
    assert list(got["units"]) == list(naive["units"]) and list(got["agree"]) == list(naive["agree"])
    units = result.units.set_index(["class", "unit"])
    assert len(units) == len(moves)
    for key, diffs in moves.items():
        assert units.loc[key, "count"] == len(diffs)
        assert units.loc[key, "diff"] == pytest.approx(np.mean(diffs), abs=1e-9)
    rho = naive["spearman"].dropna()
    assert result.summary["spearman_median"] == pytest.approx(rho.median())
    assert result.summary["spearman_q1"] == pytest.approx(rho.quantile(0.25))
    assert result.summary["rows"] == N and result.summary["agreement"] == pytest.approx(naive["agree"].mean())


def test_two_tokenizers_give_the_compare_pages_word_alignment(runs, tiny_handle) -> None:
    """The rows' Spearman equals `compare.agreement` of the two models' explanations of the same text (word-level
    alignment by character offsets, truncation included: the tiny RoBERTa cuts long sentences)."""
    result = cr.compare_runs(runs["rollout"], runs["roberta"]).examples.set_index("id")
    corpus = _corpus().set_index("id")
    assert (result["units"] < result["units_a"]).any()  # some rows were cut by one model: fewer common words
    for row_id in list(corpus.index[:12]) + ["r3", "r5"]:
        text = corpus.loc[row_id, "text"]
        want = compare.agreement(explain_text(tiny_handle("bert"), text, method="rollout"),
                                 explain_text(tiny_handle("roberta"), text, method="rollout"))
        assert want["unit"] == "word"
        assert result.loc[row_id, "units"] == want["units"], row_id
        assert result.loc[row_id, "spearman"] == pytest.approx(want["spearman"], abs=1e-4, nan_ok=True), row_id
        assert result.loc[row_id, "top_k_overlap"] == pytest.approx(want["top_5_overlap"]), row_id


def test_default_text_against_a_model_folder_with_another_tokenizer(tiny_handle, tmp_path) -> None:
    """default-text (WordPiece) against a model folder with a byte-level BPE tokenizer: per-row figures equal the
    Compare page's word alignment of the two models' explanations."""
    from rollout_core.models import registry
    from rollout_core.models.loading import load_model

    if not registry.is_available(registry.lookup("default-text")):
        pytest.skip(f"default-text is not built: {registry.SETUP_HINT}")
    default = load_model("default-text")
    corpus = _corpus(24)
    a = run_corpus(default, corpus, tmp_path / "default", progress=_quiet).out
    b = run_corpus(tiny_handle("roberta"), corpus, tmp_path / "roberta", progress=_quiet).out
    result = cr.compare_runs(a, b, min_count=1)
    rows = result.examples.set_index("id")
    assert result.describe_a.startswith("default-text") and result.summary["rows"] == 24
    for row_id in ["r0", "r3", "r5", "r9", "r17"]:
        text = corpus.set_index("id").loc[row_id, "text"]
        ea, eb = explain_text(default, text, method="rollout"), explain_text(tiny_handle("roberta"), text,
                                                                             method="rollout")
        want = compare.agreement(ea, eb)
        assert want["tokenizers_differ"] and rows.loc[row_id, "units"] == want["units"], row_id
        assert rows.loc[row_id, "spearman"] == pytest.approx(want["spearman"], abs=1e-4, nan_ok=True), row_id
        assert rows.loc[row_id, "prediction_a"] == ea.prediction[0].label
        assert rows.loc[row_id, "agree"] == (ea.prediction[0].label == eb.prediction[0].label)


def _tables(result: CorpusComparison) -> list[pd.DataFrame]:
    return [result.examples, result.classes, result.units, result.moved, result.top_lists,
            *[frame.drop(columns=[c for c in frame.columns if c.endswith(("_a", "_b")) and c.startswith(
                ("words", "starts", "ends", "scores"))]) for frame in result.disagreements.values()]]


def test_any_split_and_order_of_the_work_gives_the_same_figures_to_the_bit(runs, monkeypatch) -> None:
    whole = cr.compare_runs(runs["rollout"], runs["attention"], replicates=200)
    monkeypatch.setattr(cr, "ITEM_ROWS", 9)
    small = cr.compare_runs(runs["rollout"], runs["attention"], replicates=200, workers=2)
    monkeypatch.setattr(cr, "_aligned", lambda *args: False)  # hash buckets, each holding rows from many files
    buckets = cr.compare_runs(runs["rollout"], runs["attention"], replicates=200, workers=2)
    for other in (small, buckets):
        for want, got in zip(_tables(whole), _tables(other)):
            pd.testing.assert_frame_equal(want.reset_index(drop=True), got.reset_index(drop=True), check_exact=True)
        assert whole.summary == other.summary


def test_the_partition_writes_one_file_per_group_not_per_group_and_bucket(runs, tmp_path, monkeypatch) -> None:
    """Runs in different orders are split in groups of ITEM_ROWS rows into buckets: one file per group (a row group
    per bucket), so the scratch files grow with the rows, not with their square (was one file per group and bucket:
    1250 files at 100k rows)."""
    monkeypatch.setattr(cr, "ITEM_ROWS", 9)
    monkeypatch.setattr(cr.shutil, "rmtree", lambda *args, **kwargs: None)  # keep the scratch folder to count
    cr.compare_runs(runs["attention"], runs["attention_reversed"], replicates=20, scratch=tmp_path)
    groups = {side: len(cr._splits(cr.open_run(runs[name]), side, 7, tmp_path))
              for side, name in (("a", "attention"), ("b", "attention_reversed"))}
    files = {side: len(list(tmp_path.glob(f"*/{side}/*.parquet"))) for side in "ab"}
    assert files == groups and sum(groups.values()) < 2 * 7 * 7 / 2, (files, groups)  # 7 buckets of 9 of 60 rows


def test_a_run_stored_in_another_order_is_matched_by_id(runs) -> None:
    """B written in reverse order (other chunks, other batches): matched row by row through hash buckets."""
    result = cr.compare_runs(runs["attention"], runs["attention_reversed"])
    assert list(result.examples["id"]) == list(_corpus()["id"])
    assert result.summary["agreement"] == 1.0
    assert result.examples["spearman"].min() > 0.999  # the same model and method: the same maps up to batching


def test_bootstrap_interval_is_the_row_weighted_replicates_and_near_a_resampling_bootstrap(runs) -> None:
    result = cr.compare_runs(runs["rollout"], runs["roberta"], replicates=400, seed=5, min_count=5, top=3)
    row = result.moved.iloc[0]
    a, b = read_results(runs["rollout"]).set_index("id"), read_results(runs["roberta"]).set_index("id")
    per_row = {}  # id -> (sum of B - A over the word's occurrences, occurrences), rows of the class only
    for row_id, ra in a.iterrows():
        if ra["prediction"] != row["class"]:
            continue
        rb = b.loc[row_id]
        spans_b = {(s, e): v for s, e, v in zip(rb["starts"], rb["ends"], rb["scores"])}
        common = [(w, float(va), float(spans_b[(s, e)])) for w, s, e, va in zip(ra["words"], ra["starts"], ra["ends"],
                                                                             ra["scores"]) if (s, e) in spans_b]
        ta, tb = sum(c[1] for c in common), sum(c[2] for c in common)
        hits = [c[2] / tb - c[1] / ta for c in common if c[0].lower() == row["unit"]]
        if hits:
            per_row[row_id] = (sum(hits), len(hits))
    ids = list(per_row)
    diff, count = np.array([per_row[i][0] for i in ids]), np.array([per_row[i][1] for i in ids])
    assert row["diff"] == pytest.approx(diff.sum() / count.sum(), abs=1e-9) and row["count"] == count.sum()
    weights = poisson_weights(row_keys(ids), 400, seed=5)  # the same draws, summed naively
    assert (row["low"], row["high"]) == pytest.approx(interval(diff @ weights, count @ weights), abs=1e-8)
    rng = np.random.default_rng(0)  # an ordinary resampling bootstrap over the same rows
    draws = rng.integers(0, len(ids), (4000, len(ids)))
    ratios = diff[draws].sum(1) / count[draws].sum(1)
    low, high = np.quantile(ratios, [0.025, 0.975])
    width = high - low
    assert abs(row["low"] - low) < 0.25 * width and abs(row["high"] - high) < 0.25 * width


def test_top_lists_name_the_words_that_entered_and_left(runs) -> None:
    result = cr.compare_runs(runs["rollout"], runs["roberta"], top=5, min_count=3)
    for cls, group in result.top_lists.groupby("class"):
        table = result.units[result.units["class"] == cls]
        top_a = set(table.sort_values(["mean_a", "unit"], ascending=[False, True]).head(5)["unit"])
        top_b = set(table.sort_values(["mean_b", "unit"], ascending=[False, True]).head(5)["unit"])
        assert set(group.loc[group["change"] == "entered", "unit"]) == top_b - top_a
        assert set(group.loc[group["change"] == "left", "unit"]) == top_a - top_b
        assert set(group.loc[group["change"] == "stayed", "unit"]) == top_a & top_b


def test_disagreement_examples_are_the_extremes(runs) -> None:
    result = cr.compare_runs(runs["rollout"], runs["roberta"], examples=4)
    rows = result.examples
    agree = rows[rows["agree"] & rows["spearman"].notna()].sort_values(["spearman", "id"])
    shown = result.disagreements["explanations_differ"]
    assert list(shown["id"]) == list(agree["id"][:4])
    assert {"words_a", "scores_b", "text"} <= set(shown.columns)


def _copy_run(src: Path, dst: Path, edit=None) -> Path:
    dst.mkdir()
    (dst / "manifest.json").write_bytes((src / "manifest.json").read_bytes())
    for chunk in sorted(src.glob("chunk-*.parquet")):
        table = pq.read_table(chunk)
        pq.write_table(edit(table) if edit else table, dst / chunk.name)
    return dst


def test_runs_over_different_rows_are_refused_with_the_reason(runs, tmp_path, tiny_handle) -> None:
    corpus = _corpus()
    fewer = run_corpus(tiny_handle("bert"), corpus.iloc[:50], tmp_path / "fewer", progress=_quiet).out
    with pytest.raises(RunsDiffer, match=r"run A has 60 rows and run B 50; 10 of A's ids are not in B \('r50', "):
        cr.compare_runs(runs["rollout"], fewer)
    changed = corpus.assign(text=[t + (" Truly." if i == 7 else "") for i, t in enumerate(corpus["text"])])
    other = run_corpus(tiny_handle("bert"), changed, tmp_path / "other", progress=_quiet).out
    with pytest.raises(RunsDiffer, match=r"same ids but 1 rows differ in their text or label \('r7'\)"):
        cr.compare_runs(runs["rollout"], other)
    relabelled = _copy_run(runs["rollout"], tmp_path / "relabelled", lambda t: t.set_column(
        t.schema.get_field_index("label"), "label", pa.array([v + "!" for v in t.column("label").to_pylist()])))
    with pytest.raises(RunsDiffer, match="60 rows differ in their text or label"):
        cr.compare_runs(runs["rollout"], relabelled)
    doubled = _copy_run(runs["rollout"], tmp_path / "doubled")
    (doubled / "chunk-000099.parquet").write_bytes((doubled / "chunk-000000.parquet").read_bytes())
    with pytest.raises(RunsDiffer, match=r"run B .* holds 16 ids more than once \('r0', 'r1', 'r2', \.\.\.\)"):
        cr.compare_runs(runs["rollout"], doubled)


def test_a_damaged_chunk_is_named(runs, tmp_path) -> None:
    import shutil

    damaged = Path(shutil.copytree(runs["attention"], tmp_path / "damaged"))
    chunk = sorted(damaged.glob("chunk-*.parquet"))[1]
    chunk.write_bytes(chunk.read_bytes()[:100])
    with pytest.raises(InputError, match=f"run B: .*{chunk.name} is missing or damaged .*rerun the corpus command"):
        cr.compare_runs(runs["rollout"], damaged)


def _image_folder(root: Path, n: int) -> Path:
    for i, example in enumerate(shapes.generate(n, seed=1, size=32)):
        (root / example.label).mkdir(parents=True, exist_ok=True)
        Image.fromarray(example.image).save(root / example.label / f"{i:03d}.png")
    return root


@pytest.fixture(scope="module")
def image_runs(tiny_handle, tmp_path_factory) -> dict[str, Path]:
    from rollout_core.corpus.reader import read_corpus

    root = tmp_path_factory.mktemp("compare-images")
    corpus = read_corpus(_image_folder(root / "data", 12))
    return {name: run_corpus(tiny_handle(kind), corpus, root / name, method=method, progress=_quiet).out
            for name, kind, method in (("vit", "vit", "rollout"), ("vit_attention", "vit", "attention"),
                                       ("wide", "vit-wide", "rollout"))}


def test_image_runs_compare_patches_and_map_the_mean_difference(image_runs, tiny_handle) -> None:
    result = cr.compare_runs(image_runs["vit"], image_runs["wide"], min_count=1)
    assert result.kind == "image" and result.maps
    rows = result.examples.set_index("id")
    data = Path(image_runs["vit"]).parent / "data"
    sums: dict[str, list[np.ndarray]] = {}
    for row_id in rows.index:
        a = explain_image(tiny_handle("vit"), data / row_id, method="rollout")
        b = explain_image(tiny_handle("vit-wide"), data / row_id, method="rollout")
        want = compare.agreement(a, b)
        assert want["unit"] == "patch" and rows.loc[row_id, "units"] == want["units"] == 4 * 6
        assert rows.loc[row_id, "spearman"] == pytest.approx(want["spearman"], abs=1e-4, nan_ok=True)
        parts = compare.compare(a, b)
        sums.setdefault(rows.loc[row_id, "class"], []).append((parts.b / parts.b.sum() - parts.a / parts.a.sum())
                                                               .reshape(4, 6))
    for cls, maps in sums.items():
        assert result.maps[cls].shape == (4, 6)
        assert np.allclose(result.maps[cls], np.mean(maps, axis=0), atol=1e-6)
    assert result.moved["unit"].str.match(r"^patch \d+,\d+$").all()


def test_image_runs_of_one_model_and_two_methods(image_runs) -> None:
    result = cr.compare_runs(image_runs["vit"], image_runs["vit_attention"])
    assert result.summary["agreement"] == 1.0 and result.summary["rows"] == 12
    assert next(iter(result.maps.values())).shape == (4, 4)
    page = report_html(result)
    assert page.count("<h3>") >= 1 and "fig-map-0" in page


def test_report_is_standalone_and_escapes_the_data(runs) -> None:
    result = cr.compare_runs(runs["rollout"], runs["roberta"], examples=60)
    page = report_html(result)
    assert "<script src" not in page and "http://" not in page.split("<script>", 2)[0]
    assert "<img" not in page and "onerror" in page and "&lt;</span>" in page  # shown, escaped, word by word
    assert "<table" in page and page.count('class="pair"') >= 1
    assert "epic" not in page  # r5's combining accent is kept (NFC: "épic"), spans line up with the text
    assert "\u00e9pic" in page
    data = comparison_json(result)
    assert json.loads(json.dumps(data, allow_nan=False)) == data
    assert data["summary"]["rows"] == N and len(data["examples"]) == N
    assert {m["class"] for m in data["moved"]} == set(result.moved["class"])


@pytest.mark.slow
def test_cli_summary_json_report_and_refusal(runs, tmp_path) -> None:
    report = tmp_path / "report.html"
    fewer = _copy_run(runs["rollout"], tmp_path / "fewer", lambda t: t.slice(0, 10))
    argv = ["corpus", "compare", str(runs["rollout"]), str(runs["attention"])]
    text, as_json, refused, bad, wrong = run_cli_cases(
        [([*argv, "--out", str(report)], None), ([*argv, "--json", "--replicates", "50"], None),
         (["corpus", "compare", str(runs["rollout"]), str(fewer)], None),
         (["corpus", "compare", str(runs["rollout"]), str(tmp_path / "missing")], None),
         ([*argv, "--by", "colour"], None)], tmp_path / "cli")
    assert text.status == 0, text.stderr
    first = text.stdout.splitlines()[0]
    assert first.startswith(f"{N} rows · predictions agree on ") and "Spearman median" in first and "quartiles" in first
    assert report.is_file() and "<table" in report.read_text(encoding="utf-8")
    assert as_json.status == 0 and json.loads(as_json.stdout)["summary"]["rows"] == N
    assert_one_error_line(refused, "the runs cover different rows", "not in b")
    assert_one_error_line(bad, "run B", "no such result folder")
    assert_one_error_line(wrong, "invalid choice: 'colour'", "rollout corpus compare --help")


def test_an_out_that_cannot_be_written_is_refused_before_comparing(runs, tmp_path, monkeypatch) -> None:
    from rollout_core.corpus import compare_cli

    def never(*args, **kwargs):
        raise AssertionError("compared before the --out check")

    monkeypatch.setattr(cr, "compare_runs", never)
    argv = [str(runs["rollout"]), str(runs["attention"]), "--out"]
    with pytest.raises(InputError, match="does not exist"):
        compare_cli.main([*argv, str(tmp_path / "missing" / "report.html")])
    with pytest.raises(InputError, match="is a folder"):
        compare_cli.main([*argv, str(tmp_path)])


def test_bad_arguments_are_input_errors(runs) -> None:
    for kwargs in ({"by": "colour"}, {"k": 0}, {"replicates": 1}, {"level": 1.5}, {"scratch": "/no/such/folder"}):
        with pytest.raises(InputError):
            cr.compare_runs(runs["rollout"], runs["attention"], **kwargs)
    assert math.isfinite(cr.compare_runs(runs["rollout"], runs["attention"], by="label").summary["spearman_median"])
