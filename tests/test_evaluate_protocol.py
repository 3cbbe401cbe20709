"""Issues 17 and 29's protocol: on one input the agreement references run only when asked, on a data set integrated
gradients are an image's reference only when asked, one random ordering per input by default, an image's curves in
quarters by default (text's and every data set's in tenths, the recorded tables' full protocol), and asking for the
old protocol (both references, 3 seeds, tenths) gives its numbers, rebuilt here from the building blocks
(explanations, references, curves, measures) as the protocol defines them."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import torch

from rollout_core.errors import InputError
from rollout_core.explain import explain_image
from rollout_core.maths import attribution as maths
from rollout_core.methods import grad_x_input, integrated_gradients
from rollout_core.faithfulness.evaluate import MEASURES, NOT_COMPUTED, RANDOM_SEEDS, evaluate_dataset, evaluate_input
from rollout_core.faithfulness.measures import Item, measures, region
from rollout_core.faithfulness.perturbation import GRIDS, perturbation_curves_many
from rollout_core.inputs.continuous import prepare_image
from rollout_core.faithfulness.views import readable_table

METHODS = ["rollout", "attention", "gradient"]


def _image() -> np.ndarray:
    return np.random.default_rng(5).integers(0, 256, (32, 32, 3), dtype=np.uint8)


def _counting(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    calls: list[int] = []
    real = maths.integrated_gradients

    def counted(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202 - passes through
        calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(maths, "integrated_gradients", counted)
    return calls


def test_one_input_runs_the_references_only_when_asked(tiny_handle, monkeypatch) -> None:  # noqa: ANN001
    calls = _counting(monkeypatch)
    plain = evaluate_input(tiny_handle("vit"), _image(), METHODS)
    assert not calls and plain.not_computed == ("spearman_gxi", "spearman_ig")
    assert plain.table[["spearman_gxi", "spearman_ig"]].isna().all().all()
    asked = evaluate_input(tiny_handle("vit"), _image(), METHODS, references=("gxi", "ig"))
    assert len(calls) == 1 and asked.not_computed == ()
    assert asked.table[["spearman_gxi", "spearman_ig"]].notna().all().all()
    # the references add their columns and change nothing else
    others = [m for m in MEASURES if not m.startswith("spearman")]
    pd.testing.assert_frame_equal(plain.table[others], asked.table[others])
    # evaluated as a method, integrated gradients are computed anyway and fill the column
    as_method = evaluate_input(tiny_handle("vit"), _image(), ["rollout", "integrated_gradients"])
    assert as_method.not_computed == ("spearman_gxi",) and as_method.table["spearman_ig"].notna().all()


def test_a_text_data_set_keeps_both_references_by_default(tiny_handle, tmp_path) -> None:  # noqa: ANN001
    csv = tmp_path / "one.csv"
    pd.DataFrame({"text": ["the movie was not good"], "label": ["0"]}).to_csv(csv, index=False)
    result = evaluate_dataset(tiny_handle("bert"), csv, ["rollout"])
    assert result.not_computed == () and result.per_example[["spearman_gxi", "spearman_ig"]].notna().all().all()
    one = evaluate_input(tiny_handle("bert"), "the movie was not good", ["rollout"])
    assert one.not_computed == ("spearman_gxi", "spearman_ig")
    with pytest.raises(InputError, match="reference"):
        evaluate_input(tiny_handle("bert"), "the movie was not good", ["rollout"], references=("shap",))


def test_one_random_ordering_per_input_by_default(tiny_handle) -> None:  # noqa: ANN001
    assert RANDOM_SEEDS == 1
    result = evaluate_input(tiny_handle("bert"), "the movie was not good", ["rollout"], references=())
    curve = result.curves.query("method == 'random' and curve == 'positive'")["value"]
    assert set(curve.unique()) <= {0.0, 1.0}  # one ordering: accuracy points, not a mean of several


def test_one_image_is_read_in_quarters_a_sentence_and_a_data_set_in_tenths(tiny_handle, tmp_path) -> None:  # noqa: ANN001
    image = evaluate_input(tiny_handle("vit"), _image(), ["rollout"])
    sentence = evaluate_input(tiny_handle("bert"), "the movie was not good", ["rollout"])
    assert (image.grid, sentence.grid) == ("quarters", "tenths")
    fractions = image.curves.query("method == 'rollout'").groupby("curve")["fraction"].apply(list).to_dict()
    assert fractions == {"deletion": [0, 0.25, 0.5, 0.75, 1], "insertion": [0, 0.25, 0.5, 0.75, 1],
                         "positive": [0, 0.25, 0.5, 0.75], "negative": [0, 0.25, 0.5, 0.75]}
    full = evaluate_input(tiny_handle("vit"), _image(), ["rollout"], grid="tenths")
    assert full.scored > image.scored and len(full.curves) == 2 * (11 + 11 + 10 + 10)  # rollout and random
    folder = tmp_path / "images" / "circle"
    folder.mkdir(parents=True)
    from PIL import Image

    Image.fromarray(_image()).save(folder / "0.png")
    dataset = evaluate_dataset(tiny_handle("vit"), folder.parent, ["rollout"], agreement=False)
    assert dataset.grid == "tenths"
    with pytest.raises(InputError, match="grid"):
        evaluate_input(tiny_handle("vit"), _image(), ["rollout"], grid="tenth")
    with pytest.raises(InputError, match="grid"):
        evaluate_dataset(tiny_handle("vit"), folder.parent, ["rollout"], grid=5)


@pytest.mark.parametrize("grid", ["tenths", "quarters"])
def test_asking_for_the_old_protocol_gives_its_numbers(tiny_handle, grid) -> None:  # noqa: ANN001
    """Both references and 3 seeds (on the old grid, tenths, and on quarters): each measure as the protocol defines it,
    from the parts, on example index 0."""
    handle, image, seeds = tiny_handle("vit"), _image(), 3
    result = evaluate_input(handle, image, METHODS, references=("gxi", "ig"), seeds=seeds, grid=grid)
    prepared = prepare_image(handle, image)
    target = int(prepared.probabilities(torch.ones(1, prepared.n, dtype=torch.bool))[0].argmax())
    explanations = {m: explain_image(handle, image, method=m, target=target) for m in METHODS}
    references = {"grad_x_input": grad_x_input.attribute(prepared, target),
                  "integrated_gradients": integrated_gradients.attribute(prepared, target)}
    vectors = {m: [torch.as_tensor(e.scores)] for m, e in explanations.items()}
    vectors["random"] = [torch.rand(prepared.n, generator=torch.Generator().manual_seed(s), dtype=torch.float64)
                         for s in range(seeds)]
    where = region(explanations["rollout"], Item(image))
    for method, vs in vectors.items():
        curves = perturbation_curves_many(prepared.probabilities, vs, prepared.removable, target=target,
                                          grid=GRIDS[grid])
        rows = [measures(prepared, v, c, where, references) for v, c in zip(vs, curves)]
        for measure in MEASURES:
            want = np.mean([r[measure] for r in rows])
            assert result.table.loc[method, measure] == pytest.approx(want, abs=1e-6, nan_ok=True), (method, measure)


def test_tables_say_not_computed_never_a_number(tiny_handle, tiny_model_dir, tmp_path, capsys) -> None:  # noqa: ANN001
    from rollout_core.faithfulness.cli_evaluate import main

    result = evaluate_input(tiny_handle("vit"), _image(), ["rollout"], references=("gxi",))
    frame, notes = readable_table(result.table, result.not_computed)
    row = frame.loc["Rank agreement with integrated gradients"]
    assert (row[["rollout", "random"]] == NOT_COMPUTED).all() and any(NOT_COMPUTED in n for n in notes)
    assert frame.loc["Rank agreement with gradient × input", "rollout"] != NOT_COMPUTED
    folder = tmp_path / "images"
    for label in ("circle", "square"):
        (folder / label).mkdir(parents=True)
        from PIL import Image

        Image.fromarray(_image()).save(folder / label / "0.png")
    summary = evaluate_dataset(tiny_handle("vit"), folder, ["rollout"], limit=2)
    assert summary.not_computed == ("spearman_ig",)
    line = next(x for x in summary.markdown().splitlines() if x.startswith("| rollout |"))
    assert line.rstrip(" |").endswith(NOT_COMPUTED)
    out = tmp_path / "out"
    assert main(["--model", str(tiny_model_dir("vit")), "--dataset", str(folder), "--methods", "rollout",
                 "--out", str(out)]) == 0
    assert "spearman_ig: not computed (ask with --references gxi ig)" in capsys.readouterr().out
    assert "not computed (ask with --references gxi ig)" in (out / "images.md").read_text()
    assert main(["--model", str(tiny_model_dir("vit")), "--dataset", str(folder), "--methods", "rollout",
                 "--references", "gxi", "ig", "--out", str(out)]) == 0
    assert NOT_COMPUTED not in (out / "images.md").read_text()
    assert "curves read at tenths (0, 0.1, …, 1; Chefer's to 0.9)" in (out / "images.md").read_text()
    assert main(["--model", str(tiny_model_dir("vit")), "--dataset", str(folder), "--methods", "rollout",
                 "--no-agreement", "--grid", "fifths", "--out", str(out)]) == 0
    report = (out / "images.md").read_text()
    assert "curves read at fifths (0, 0.2, …, 1; Chefer's to 0.8)" in report and "in steps of 0.2" in report
    capsys.readouterr()
    assert main(["--model", "default-image", "--grid", "fifths", "--record"]) == 2  # records keep the full grid
    assert "--record stores the full protocol" in capsys.readouterr().err
    assert main(["--model", str(tiny_model_dir("vit")), "--dataset", str(folder), "--references", "ig",
                 "--no-agreement"]) == 2


def test_examples_on_two_threads_give_the_rows_of_one(tiny_handle, tmp_path) -> None:  # noqa: ANN001
    csv = tmp_path / "three.csv"
    pd.DataFrame({"text": ["the film was great", "it was bad", "a dog sat on the mat"],
                  "label": ["positive", "0", "1"]}).to_csv(csv, index=False)
    seen: list[tuple[int, int]] = []
    two = evaluate_dataset(tiny_handle("bert"), csv, ["rollout", "attention"], workers=2,
                           progress=lambda d, t: seen.append((d, t)))
    one = evaluate_dataset(tiny_handle("bert"), csv, ["rollout", "attention"], workers=1)
    pd.testing.assert_frame_equal(two.per_example, one.per_example, rtol=1e-6)
    assert seen == [(0, 3), (1, 3), (2, 3), (3, 3)] and torch.get_num_threads() == 1  # restored (conftest: 1)
    with pytest.raises(InputError, match="workers"):
        evaluate_dataset(tiny_handle("bert"), csv, ["rollout"], workers=0)
