"""The Evaluate page's words, tables, curve styles and progress: unit tests on the core, then the page."""
from __future__ import annotations

import math
from pathlib import Path
from typing import Callable

import numpy as np
import pandas as pd
import torch

from rollout_core import methods

from rollout_core.faithfulness.perturbation import perturbation_curves_many
from rollout_core.faithfulness.views import progress_text, readable_summary, readable_table
from rollout_core.figures import curves_figure
from test_pages_apptest import assert_clean, page, png, texts

NAN = float("nan")


def _table() -> pd.DataFrame:
    rows = {"rollout": [0.25, 0.5, 40.0, 70.0, NAN, NAN, NAN, 0.5, 0.25],
            "random": [0.5, 0.5, 45.0, 45.0, NAN, NAN, NAN, 0.0, NAN]}
    columns = ["deletion_auc", "insertion_auc", "positive_auc", "negative_auc", "pointing_game", "mass_share", "iou",
               "spearman_gxi", "spearman_ig"]
    return pd.DataFrame.from_dict(rows, orient="index", columns=columns).rename_axis("method")


def test_one_input_table_has_human_rows_units_and_no_empty_columns() -> None:
    frame, notes = readable_table(_table())
    assert list(frame.columns) == ["better", "scale", "rollout", "random"]
    assert list(frame.index) == ["Deletion AUC", "Insertion AUC", "Positive perturbation AUC (Chefer)",
                                 "Negative perturbation AUC (Chefer)", "Rank agreement with gradient × input",
                                 "Rank agreement with integrated gradients"]  # no ground truth without a region
    assert frame.loc["Deletion AUC", "better"] == "lower ↓" and frame.loc["Insertion AUC", "better"] == "higher ↑"
    assert frame.loc["Positive perturbation AUC (Chefer)", "scale"].startswith("×100")
    assert frame.loc["Deletion AUC", "scale"].startswith("0–1")
    assert frame.loc["Negative perturbation AUC (Chefer)", "rollout"] == "70.0"
    assert frame.loc["Deletion AUC", "rollout"] == "0.250"
    assert frame.loc["Rank agreement with integrated gradients", "random"] == "n/a"
    cells = frame.to_numpy().ravel().tolist()
    assert not any(str(c) in ("None", "nan") for c in cells)
    assert any("known deciding region" in n for n in notes) and any("× 100" in n for n in notes)
    assert frame.loc["Negative perturbation AUC (Chefer)", "scale"] == "×100: 0–90 (accuracy over 0–0.9 removed)"
    fifths, _ = readable_table(_table(), grid="fifths")  # its Chefer curves end at 0.8
    assert fifths.loc["Negative perturbation AUC (Chefer)", "scale"] == "×100: 0–80 (accuracy over 0–0.8 removed)"
    assert fifths.loc["Deletion AUC", "scale"] == frame.loc["Deletion AUC", "scale"]


def test_summary_table_shows_mean_and_std_and_keeps_ground_truth_when_present() -> None:
    means, stds = _table(), _table() / 10
    means["pointing_game"] = [1.0, 0.5]
    stds["pointing_game"] = [0.0, 0.5]
    summary = pd.concat({"mean": means, "std": stds}, axis=1).swaplevel(axis=1)
    frame, notes = readable_summary(summary)
    assert frame.loc["Pointing game (top point in the region)", "random"] == "0.500 ± 0.500"
    assert frame.loc["Positive perturbation AUC (Chefer)", "rollout"] == "40.0 ± 4.0"
    assert "Relevance mass inside the region" not in frame.index
    assert any("known deciding region" in n for n in notes)


def test_every_method_has_its_own_colour_and_dash_and_none_is_the_baselines_grey() -> None:
    x = [0.0, 0.5, 1.0]
    names = ["rollout", "flow", "gradient", "attention", "grad_x_input", "integrated_gradients"]
    fig = curves_figure({n: (x, [1, 0.5, 0]) for n in names}, random=(x, [1, 0.5, 0]))
    lines = [t.line for t in fig.data[:-1]]
    colours = [line.color for line in lines]
    assert len(set(colours)) == len(names) and fig.data[-1].line.color not in colours
    assert all(a.dash != b.dash for a, b in zip(lines, lines[1:]))  # coinciding neighbours stay visible
    assert len({t.marker.symbol for t in fig.data[:-1]}) == len(names)


def test_progress_text_counts_and_estimates_time_left() -> None:
    assert progress_text(0, 50, 0.0, "explaining with rollout") == "explaining with rollout · 0/50 model passes"
    assert progress_text(10, 50, 5.0) == "10/50 model passes · about 20 s left"  # 5 s per 10 -> 40 left: 20 s
    assert progress_text(1, 101, 2.0, unit="examples") == "1/101 examples · about 3.3 min left"
    # one input: milliseconds of work, no count; no estimate while the total is not known
    assert progress_text(400, 1000, 0.4, "scoring", unit=None) == "scoring · about 1 s left"
    assert progress_text(400, 0, 0.4, "checking the deletion baseline", unit=None) == "checking the deletion baseline"


def test_perturbation_progress_reports_every_chunk_and_scores_the_same() -> None:
    weights = torch.tensor([0.3, -1.0, 2.0, 0.1, 0.7, -0.2], dtype=torch.float64)

    def scorer(keep: torch.Tensor) -> torch.Tensor:
        logit = keep.double() @ weights
        return torch.softmax(torch.stack([torch.zeros_like(logit), logit], dim=-1), dim=-1)

    removable = torch.tensor([False, True, True, True, True, True])
    vectors = [torch.tensor([0, 5, 4, 3, 2, 1.0]), torch.tensor([0, 1, 2, 3, 4, 5.0])]
    seen: list[tuple[int, int]] = []
    chunked = perturbation_curves_many(scorer, vectors, removable, target=1, progress=lambda d, t: seen.append((d, t)),
                                       chunk=4)
    whole = perturbation_curves_many(scorer, vectors, removable, target=1)
    total = seen[-1][1]
    assert seen[-1] == (total, total) and [d for d, _ in seen] == sorted({d for d, _ in seen})
    assert len(seen) == math.ceil(total / 4) and total <= 2 * 42
    for a, b in zip(chunked, whole):
        assert a.auc == b.auc and a.values == b.values


def test_evaluate_input_progress_ends_at_its_total(tiny_handle) -> None:  # noqa: ANN001 - fixture
    from rollout_core.faithfulness.evaluate import evaluate_input

    seen: list[tuple[int, int, str]] = []
    evaluate_input(tiny_handle("bert"), "the movie was not good", methods=["rollout", "attention"],
                   progress=lambda d, t, w: seen.append((d, t, w)))
    done = [d for d, _, _ in seen]
    assert done == sorted(done) and seen[-1][0] == seen[-1][1]
    # both methods in one step (they share a forward pass, explain_methods), then the baseline's check
    assert [w for _, _, w in seen[:2]] == ["explaining with rollout, attention", "checking the deletion baseline"]
    assert all(t == 0 or d <= t for d, t, _ in seen) and all(t > 0 for _, t, _ in seen[2:])


# ----------------------------------------------------------------------------------------------
# The page


def _frame_cells(at) -> list[str]:  # noqa: ANN001 - AppTest
    frame = at.table[-1].value  # the measures
    return [str(c) for c in frame.to_numpy().ravel()] + [str(i) for i in frame.index]


def test_evaluate_page_has_readable_labels_and_four_titled_curves(tiny_model_dir: Callable[[str], Path]) -> None:
    at = page("app_pages/evaluate.py", model=str(tiny_model_dir("bert")), text="a good film")
    at.button[0].click().run()
    assert_clean(at)
    assert not at.error, texts(at.error)
    cells = _frame_cells(at)
    assert "Deletion AUC" in cells and not any(c in ("None", "nan") for c in cells)
    columns = list(at.table[-1].value.columns)  # methods by display name, no raw ids
    assert "Attention rollout" in columns and "rollout" not in columns
    charts = at.get("plotly_chart")
    assert len(charts) == 4
    specs = [c.proto.spec for c in charts]
    assert not any("curve=" in s or '"value"' in s for s in specs)
    assert any("known deciding region" in c for c in texts(at.caption))


def test_evaluate_page_runs_on_an_uploaded_image(tiny_model_dir: Callable[[str], Path]) -> None:
    at = page("app_pages/evaluate.py", model=str(tiny_model_dir("vit")), modality="image")
    pixels = np.zeros((40, 40, 3), np.uint8)
    pixels[:20] = 255
    at.file_uploader(key="upload").set_value(("half.png", png(pixels), "image/png")).run()
    at.button[0].click().run()
    assert_clean(at)
    assert not at.error, texts(at.error)
    assert at.get("metric") and len(at.get("plotly_chart")) == 4
    # issue 29: one input's references are computed only when their boxes are ticked, and the page says what ran
    assert "not computed" in _frame_cells(at) and any("not asked for" in c for c in texts(at.caption))
    assert any(c.startswith("Ran: ") and "no attention-free reference" in c and "1 random ordering" in c
               and "curves read at quarters (0, 0.25, …, 1; Chefer's to 0.75), not the full protocol's tenths" in c
               for c in texts(at.caption))
    assert "×100: 0–75 (accuracy over 0–0.75 removed)" in _frame_cells(at)
    at.checkbox(key="one_gxi_image").check()
    at.checkbox(key="one_ig_image").check()
    at.number_input(key="seeds").set_value(3).run()
    at.radio(key="one_grid_image").set_value("tenths").run()
    at.button[0].click().run()
    assert_clean(at)
    cells = _frame_cells(at)
    assert "not computed" not in cells and "×100: 0–90 (accuracy over 0–0.9 removed)" in cells
    assert any("agreement with gradient × input and integrated gradients" in c and "3 random orderings" in c
               and "curves read at tenths (0, 0.1, …, 1; Chefer's to 0.9)." in c for c in texts(at.caption))


def test_integrated_gradients_with_progress_reports_its_steps_and_gives_the_same_scores(tiny_handle) -> None:  # noqa: ANN001
    from rollout_core.inputs.continuous import prepare_text
    from rollout_core.methods import integrated_gradients

    prepared = prepare_text(tiny_handle("bert"), "the movie was not good")
    seen: list[int] = []
    with_progress = integrated_gradients.attribute(prepared, 1, seen.append, steps=20)
    plain = integrated_gradients.attribute(prepared, 1, steps=20)
    assert seen[:4] == [5, 10, 15, 20] and seen[-1] == 20  # 20 steps in CHUNKS = 4 passes of 5
    assert torch.allclose(with_progress, plain, atol=1e-6)


def test_a_stopped_data_set_run_shows_the_examples_it_finished(tiny_model_dir: Callable[[str], Path],
                                                               tmp_path: Path) -> None:
    """What a Stop leaves in the session (the finished examples' rows) is shown on the rerun, and said to be partial."""
    from rollout_core.faithfulness.evaluate import evaluate_dataset

    model = str(tiny_model_dir("bert"))
    csv = tmp_path / "two.csv"
    pd.DataFrame({"text": ["the film was great", "it was bad"], "label": ["positive", "0"]}).to_csv(csv, index=False)
    rows: list[dict] = []
    whole = evaluate_dataset(model, csv, methods=("rollout", "attention"), agreement=False, collect=rows)
    at = page("app_pages/evaluate.py", model=model)
    at.session_state["evaluate_partial"] = {"rows": rows, "methods": ["rollout", "attention"], "limit": 10}
    at.run()
    assert_clean(at)
    assert any("Stopped after 2 of 10 examples" in w for w in texts(at.warning))
    assert at.get("metric") and len(at.table) == 1
    assert f"{whole.accuracy:.1%}" in str(at.get("metric")[0].proto)
    at.run()  # shown once: the next rerun is a fresh page
    assert not at.warning and not at.table


def test_evaluate_starts_with_the_pages_method_shows_its_prediction_and_clears_the_run(
        tiny_model_dir: Callable[[str], Path]) -> None:
    at = page("app_pages/evaluate.py", model=str(tiny_model_dir("bert")), text="a good film", method="norm")
    assert_clean(at)
    assert at.multiselect(key="methods").value[0] == "norm"  # the method the other pages show comes first
    name = methods.display_name  # the picker shows display names
    assert name("knockout_shapley") in at.multiselect(key="methods").options  # a text classifier can run it
    at.button[0].click().run()
    assert_clean(at)
    text_page = page("app_pages/text.py", model=str(tiny_model_dir("bert")), text="a good film", method="norm")
    assert at.get("metric")[0].proto.delta == text_page.get("metric")[0].proto.delta  # one probability
    assert not at.get("progress") and not [b for b in at.button if b.key == "evaluate_one_stop"]
    image = page("app_pages/evaluate.py", model=str(tiny_model_dir("dinov2")), modality="image")
    assert_clean(image)
    offered = image.multiselect(key="methods").options
    assert name("gradient") not in offered and name("knockout_shapley") not in offered  # a backbone: no class


def test_stop_on_one_input_does_not_start_it_again(tiny_model_dir: Callable[[str], Path]) -> None:
    at = page("app_pages/evaluate.py", model=str(tiny_model_dir("bert")), text="a good film")
    at.session_state["evaluate_one"] = True
    at.session_state["evaluate_one_stopped"] = True  # what the Stop button's callback leaves before its rerun
    at.session_state["evaluate_one"] = False
    at.run()
    assert_clean(at)
    assert any("Stopped" in str(i.value) for i in at.info) and not at.get("plotly_chart")
