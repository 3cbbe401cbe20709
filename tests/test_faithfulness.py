"""Faithfulness measures against hand-computed cases, brute force and identities; then the real pipeline
on tiny random-weight models (tests/tiny_models.py) and, when built, the default models."""
from __future__ import annotations

import itertools

import numpy as np
import pandas as pd
import pytest
import torch

from rollout_core.errors import InputError
from rollout_core.faithfulness import ground_truth
from rollout_core.maths.attribution import completeness_gap
from rollout_core.maths.ranks import spearman
from rollout_core.methods import grad_x_input, integrated_gradients
from rollout_core.faithfulness.perturbation import (
    FULL_GRID, GRIDS, importance_order, keep_masks, named_grid, perturbation_curves,
    perturbation_curves_many, trapezoid_auc)
from rollout_core.inputs.continuous import PreparedInput, prepare_image, prepare_text


# ----------------------------------------------------------------------------------------------
# A toy model: logit(class 1) = sum of the kept positions' weights - bias, logit(class 0) = 0


class LinearScorer:
    """Two classes; records every keep mask it was asked about."""

    def __init__(self, weights: list[float], bias: float):
        self.w = torch.tensor(weights, dtype=torch.float64)
        self.bias = bias
        self.seen: list[torch.Tensor] = []

    def __call__(self, keep: torch.Tensor) -> torch.Tensor:
        self.seen.append(keep.clone())
        logit = keep.double() @ self.w - self.bias
        return torch.softmax(torch.stack([torch.zeros_like(logit), logit], dim=-1), dim=-1)


def test_trapezoid_auc_hand_numbers():
    assert trapezoid_auc([0, 0.5, 1], [1, 0.5, 0]) == pytest.approx(0.5)
    assert trapezoid_auc([0, 1, 3], [2, 4, 0]) == pytest.approx(3 + 4)
    assert trapezoid_auc(list(GRIDS[FULL_GRID].chefer), [1.0] * 10) == pytest.approx(0.9)
    with pytest.raises(ValueError):
        trapezoid_auc([0, 1], [1, 2, 3])


def test_order_ties_broken_by_position_and_special_left_out():
    removable = torch.tensor([False, True, True, True, True, False])
    order = importance_order(torch.tensor([9.0, 0.2, 0.5, 0.2, 0.5, 9.0]), removable)
    assert order.tolist() == [2, 4, 1, 3]


def test_keep_masks_by_hand():
    order = torch.tensor([3, 1, 2])
    masks = keep_masks(order, 5, [0.0, 1 / 3, 2 / 3, 1.0], insert=False)
    assert masks.int().tolist() == [[1, 1, 1, 1, 1], [1, 1, 1, 0, 1], [1, 0, 1, 0, 1], [1, 0, 0, 0, 1]]
    inserted = keep_masks(order, 5, [0.0, 1 / 3, 1.0], insert=True)
    assert inserted.int().tolist() == [[1, 0, 0, 0, 1], [1, 0, 0, 1, 1], [1, 1, 1, 1, 1]]


def _toy(seed: int = 0):
    """7 positions: 0 and 6 special (huge weights: removing them would flip everything), 5 removable."""
    weights = [50.0, 3.0, -1.0, 5.0, 0.5, 2.0, 50.0]
    return LinearScorer(weights, bias=101.0), torch.tensor([False, True, True, True, True, True, False]), weights


def test_perfect_importance_is_best_of_all_orderings_and_reversed_worst():
    scorer, removable, weights = _toy()
    w = torch.tensor(weights)
    results = {}
    for perm in itertools.permutations(range(1, 6)):
        importance = torch.zeros(7)
        importance[list(perm)] = torch.arange(5, 0, -1, dtype=torch.float32)  # perm[0] most important
        results[perm] = perturbation_curves(scorer, importance, removable, target=1).auc
    perfect = perturbation_curves(scorer, w, removable, target=1).auc
    reversed_ = perturbation_curves(scorer, -w, removable, target=1).auc
    deletions = [r["deletion"] for r in results.values()]
    insertions = [r["insertion"] for r in results.values()]
    assert perfect["deletion"] == pytest.approx(min(deletions))
    assert reversed_["deletion"] == pytest.approx(max(deletions))
    assert perfect["insertion"] == pytest.approx(max(insertions))
    assert reversed_["insertion"] == pytest.approx(min(insertions))
    random = [perturbation_curves(scorer, torch.rand(7, generator=torch.Generator().manual_seed(s)), removable,
                                  target=1).auc for s in range(5)]
    assert perfect["deletion"] < np.mean([r["deletion"] for r in random]) < reversed_["deletion"]
    assert perfect["insertion"] > np.mean([r["insertion"] for r in random]) > reversed_["insertion"]


def test_special_positions_never_removed():
    scorer, removable, weights = _toy()
    perturbation_curves(scorer, torch.tensor([100.0, 1, 2, 3, 4, 5, 100.0]), removable, target=1)
    seen = torch.cat(scorer.seen)
    assert seen[:, 0].all() and seen[:, 6].all()
    assert not seen[:, 1:6].all()  # the removable ones were removed somewhere


def test_deletion_curve_values_by_hand_and_insertion_mirrors_deletion():
    weights = [float(v) for v in range(10, 0, -1)]  # 10 removable positions, no special ones
    scorer = LinearScorer(weights, bias=27.5)
    removable = torch.ones(10, dtype=torch.bool)
    curves = perturbation_curves(scorer, torch.tensor(weights), removable, target=1)
    remaining = [55 - sum(weights[:k]) for k in range(11)]
    expected = [1 / (1 + np.exp(-(r - 27.5))) for r in remaining]
    assert curves.fractions["deletion"] == [i / 10 for i in range(11)]
    assert np.allclose(curves.values["deletion"], expected)
    # inserting the top f == deleting the bottom 1 - f (exact when f * m is whole)
    reverse = perturbation_curves(scorer, -torch.tensor(weights), removable, target=1)
    assert np.allclose(curves.values["insertion"], reverse.values["deletion"][::-1])


def test_chefer_positive_negative_by_hand():
    weights = [float(v) for v in range(10, 0, -1)]
    scorer = LinearScorer(weights, bias=27.5)
    removable = torch.ones(10, dtype=torch.bool)
    curves = perturbation_curves(scorer, torch.tensor(weights), removable, target=1, label=1)
    # remaining weight when the k largest are removed: 55, 45, 36, 28, 21, ... -> class 1 while > 27.5
    assert curves.values["positive"] == [1, 1, 1, 1, 0, 0, 0, 0, 0, 0]
    assert curves.auc["positive"] == pytest.approx(100 * (0.3 + 0.05))
    # the k smallest removed: 55, 54, 52, 49, 45, 40, 34, 27, ... -> 7 correct points
    assert curves.values["negative"] == [1, 1, 1, 1, 1, 1, 1, 0, 0, 0]
    assert curves.auc["negative"] == pytest.approx(100 * (0.6 + 0.05))
    wrong_label = perturbation_curves(scorer, torch.tensor(weights), removable, target=1, label=0)
    assert wrong_label.values["positive"] == [0, 0, 0, 0, 1, 1, 1, 1, 1, 1]


def test_fifths_grid_by_hand_with_its_areas_a_trapezoid_on_the_same_points():
    weights = [float(v) for v in range(10, 0, -1)]  # 10 removable positions: a fifth is 2 of them
    scorer = LinearScorer(weights, bias=27.5)
    removable = torch.ones(10, dtype=torch.bool)
    curves = perturbation_curves(scorer, torch.tensor(weights), removable, target=1, label=1, grid=GRIDS["fifths"])
    x = [0.0, 0.2, 0.4, 0.6, 0.8, 1.0]
    assert curves.fractions["deletion"] == curves.fractions["insertion"] == x
    assert curves.fractions["positive"] == curves.fractions["negative"] == x[:5]  # Chefer's up to 0.9: 0 .. 0.8
    # deleting the top 0, 2, 4, ... positions leaves 55, 36, 21, 10, 3, 0 of the weight
    deletion = [1 / (1 + np.exp(-(r - 27.5))) for r in (55, 36, 21, 10, 3, 0)]
    insertion = [1 / (1 + np.exp(-(r - 27.5))) for r in (0, 19, 34, 45, 52, 55)]  # the top 0, 2, 4, ... put back
    assert np.allclose(curves.values["deletion"], deletion) and np.allclose(curves.values["insertion"], insertion)
    by_hand = {name: sum(0.2 * (y[i] + y[i + 1]) / 2 for i in range(5))
               for name, y in (("deletion", deletion), ("insertion", insertion))}
    assert curves.auc["deletion"] == pytest.approx(by_hand["deletion"], abs=1e-12)
    assert curves.auc["insertion"] == pytest.approx(by_hand["insertion"], abs=1e-12)
    # positive: 55, 36 stay above 27.5, 21 does not; negative (the smallest removed): 55, 52, 45, 34 above, 19 not
    assert curves.values["positive"] == [1, 1, 0, 0, 0] and curves.values["negative"] == [1, 1, 1, 1, 0]
    assert curves.auc["positive"] == pytest.approx(100 * (0.2 + 0.1))
    assert curves.auc["negative"] == pytest.approx(100 * (0.6 + 0.1))


def test_quarters_by_hand():
    weights = [float(v) for v in range(8, 0, -1)]  # 8 removable positions: a quarter is 2 of them
    scorer = LinearScorer(weights, bias=18.0)
    curves = perturbation_curves(scorer, torch.tensor(weights), torch.ones(8, dtype=torch.bool), target=1, label=1,
                                 grid=GRIDS["quarters"])
    assert curves.fractions["deletion"] == [0, 0.25, 0.5, 0.75, 1] and curves.fractions["positive"] == [0, 0.25, 0.5,
                                                                                                      0.75]
    deletion = [1 / (1 + np.exp(-(r - 18))) for r in (36, 21, 10, 3, 0)]  # the top 0, 2, 4, 6, 8 removed
    assert np.allclose(curves.values["deletion"], deletion)
    assert curves.auc["deletion"] == pytest.approx(sum(0.25 * (deletion[i] + deletion[i + 1]) / 2 for i in range(4)))
    # positive: 36, 21 above 18, then 10, 3; negative (the smallest removed first): 36, 33, 26 above, then 15
    assert curves.values["positive"] == [1, 1, 0, 0] and curves.values["negative"] == [1, 1, 1, 0]
    assert curves.auc["positive"] == pytest.approx(100 * (0.25 + 0.125))
    assert curves.auc["negative"] == pytest.approx(100 * (0.5 + 0.125))


def test_fifths_are_every_other_point_of_tenths():
    weights = torch.tensor([0.0, 3, 1, 4, 1, 5, 9, 2, 6, 5, 3, 0])  # 10 removable: fifths are whole tenths
    removable = torch.tensor([False] + [True] * 10 + [False])
    scorer = LinearScorer([0.0, 1.5, -2, 3, 0.5, 1, -1, 2.5, 0.2, 4, -3, 0.0], bias=2.0)
    tenths = perturbation_curves(scorer, weights, removable, target=1)
    fifths = perturbation_curves(scorer, weights, removable, target=1, grid=GRIDS["fifths"])
    for name in fifths.values:
        assert fifths.values[name] == pytest.approx(tenths.values[name][::2], abs=1e-15), name
    assert FULL_GRID == "tenths"
    assert [g.rows for g in GRIDS.values()] == [18, 8, 6]
    with pytest.raises(InputError, match="tenths, fifths"):
        named_grid("thirds")


def test_scorer_called_once_with_unique_masks_for_many_orderings():
    scorer, removable, weights = _toy()
    importances = [torch.tensor(weights), -torch.tensor(weights),
                   torch.rand(7, generator=torch.Generator().manual_seed(1))]
    together = perturbation_curves_many(scorer, importances, removable, target=1, label=0)
    assert len(scorer.seen) == 1
    assert len(torch.unique(scorer.seen[0], dim=0)) == len(scorer.seen[0])
    for importance, curves in zip(importances, together):
        alone = perturbation_curves(scorer, importance, removable, target=1, label=0)
        assert alone.values == curves.values and alone.auc == curves.auc


# ----------------------------------------------------------------------------------------------
# Ground truth


def test_text_region_overlap():
    offsets = [(0, 0), (0, 3), (4, 9), (10, 13), (13, 14), (0, 0)]
    special = np.array([True, False, False, False, False, True])
    region = ground_truth.text_region(offsets, special, [(4, 11)])
    assert region.tolist() == [False, False, True, True, False, False]


def test_patch_region_half_rule():
    mask = np.zeros((4, 4), dtype=bool)
    mask[0, 0:2] = True  # patch (0,0): 2 of 4 pixels -> inside (>= 50%)
    mask[2, 2] = True  # patch (1,1): 1 of 4 -> outside
    mask[0:2, 2:4] = True  # patch (0,1): all -> inside
    region = ground_truth.patch_region(mask, (4, 4), (2, 2), np.arange(1, 5), 5)
    assert region.tolist() == [False, True, True, False, False]
    bigger = ground_truth.patch_region(mask, (8, 8), (2, 2), np.arange(1, 5), 5)  # resized like the image
    assert bigger.tolist() == region.tolist()


def test_pointing_mass_iou_hand_cases():
    shown = np.array([False, True, True, True, True])
    region = np.array([False, False, True, True, False])
    scores = np.array([0.9, 0.1, 0.4, 0.2, 0.3])  # position 0 is special: ignored
    assert ground_truth.pointing_game(scores, region, shown) == 1.0
    assert ground_truth.pointing_game(np.array([0, 0.5, 0.5, 0, 0]), region, shown) == 0.0  # tie: earliest
    assert ground_truth.mass_share(scores, region, shown) == pytest.approx(0.6)
    # top set holding >= 50%: {2 (0.4), 4 (0.3)} = 0.7 -> IoU with {2, 3} = 1 / 3
    assert ground_truth.iou_at_mass(scores, region, shown) == pytest.approx(1 / 3)
    assert ground_truth.iou_at_mass(scores, region, shown, mass=0.4) == pytest.approx(1 / 2)
    assert np.isnan(ground_truth.pointing_game(scores, np.zeros(5, bool), shown))
    assert ground_truth.mass_share(np.array([0, -1.0, 2.0, 1.0, 1.0]), region, shown) == pytest.approx(0.75)


# ----------------------------------------------------------------------------------------------
# Attribution


def test_spearman_identities_and_formula():
    a = np.array([0.1, 0.5, 0.3, 0.9, 0.7])
    assert spearman(a, a * 3 + 1) == pytest.approx(1.0)
    assert spearman(a, -a) == pytest.approx(-1.0)
    b = np.array([0.2, 0.1, 0.3, 0.5, 0.4])  # ranks a: 1 3 2 5 4, b: 2 1 3 5 4 -> d^2 = 1 4 1 0 0
    assert spearman(a, b) == pytest.approx(1 - 6 * 6 / (5 * 24))
    assert np.isnan(spearman(a, np.ones(5)))


def _mlp_input() -> tuple[PreparedInput, torch.nn.Module]:
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(12, 16), torch.nn.Tanh(), torch.nn.Linear(16, 3))
    net = net.double()
    x = torch.randn(1, 4, 3, dtype=torch.float64)  # 4 positions x 3 features
    baseline = torch.zeros_like(x)
    owner = torch.arange(4)[:, None].expand(4, 3)
    return PreparedInput(4, torch.ones(4, dtype=torch.bool), x, baseline, owner, net), net


def test_integrated_gradients_completeness_on_a_small_model():
    prepared, net = _mlp_input()
    scores = integrated_gradients.attribute(prepared, 2, steps=64)
    delta = completeness_gap(prepared.forward, prepared.x, prepared.baseline, 2, scores)
    with torch.no_grad():
        gap = float(net(prepared.x)[0, 2] - net(prepared.baseline)[0, 2])
    assert float(scores.sum()) == pytest.approx(gap, abs=1e-4)
    assert delta < 1e-4


def test_input_x_gradient_of_a_linear_model_by_hand():
    w = torch.tensor([[1.0, -2.0], [0.5, 3.0]], dtype=torch.float64)  # (positions, features) weights of class 1
    x = torch.tensor([[[2.0, 1.0], [4.0, -1.0]]], dtype=torch.float64)

    def forward(batch):
        logit = (batch * w).sum((1, 2))
        return torch.stack([torch.zeros_like(logit), logit], -1)

    prepared = PreparedInput(2, torch.ones(2, dtype=torch.bool), x, torch.zeros_like(x),
                             torch.arange(2)[:, None].expand(2, 2), forward)
    scores = grad_x_input.attribute(prepared, 1)
    assert scores.tolist() == pytest.approx([2 * 1 - 2 * 1, 0.5 * 4 - 3])


# ----------------------------------------------------------------------------------------------
# Real models (tiny, random weights)


@pytest.fixture(scope="module")
def tiny(tiny_handle):
    return {k: tiny_handle(k) for k in ("bert", "vit")}


def test_text_perturbation_equals_masked_token_ids(tiny):
    handle = tiny["bert"]
    prepared = prepare_text(handle, "the movie was not good")
    ids = handle.processor("the movie was not good", return_tensors="pt")["input_ids"]
    assert prepared.removable.tolist() == [False] + [True] * (ids.shape[1] - 2) + [False]
    keep = torch.ones(2, prepared.n, dtype=torch.bool)
    keep[0, 2] = keep[1, 1] = keep[1, 4] = False
    masked = ids.repeat(2, 1)
    masked[~keep] = handle.processor.mask_token_id
    with torch.no_grad():
        expected = torch.softmax(handle.model(input_ids=masked, attention_mask=torch.ones_like(masked)).logits, -1)
    assert torch.allclose(prepared.probabilities(keep), expected, atol=1e-5)


def test_image_perturbation_replaces_whole_patches_with_the_mean_colour(tiny):
    handle = tiny["vit"]
    image = np.random.default_rng(0).integers(0, 256, (32, 32, 3), dtype=np.uint8)
    prepared = prepare_image(handle, image)
    assert prepared.n == 17 and not prepared.removable[0] and prepared.removable[1:].all()
    keep = torch.ones(1, 17, dtype=torch.bool)
    keep[0, 1 + 5] = False  # patch row 1, col 1 (grid 4x4 of 8 px)
    out = prepared.perturbed(keep)[0]
    expected = prepared.x[0].clone()
    mean = prepared.x[0].mean(dim=(1, 2))
    for c in range(3):
        for yy in range(8, 16):
            for xx in range(8, 16):
                expected[c, yy, xx] = mean[c]
    assert torch.allclose(out, expected)


def test_integrated_gradients_completeness_on_tiny_bert(tiny):
    prepared = prepare_text(tiny["bert"], "i loved it but the plot was boring")
    scores = integrated_gradients.attribute(prepared, 0, steps=64)
    with torch.no_grad():
        gap = float(prepared.forward(prepared.x)[0, 0] - prepared.forward(prepared.baseline)[0, 0])
    assert float(scores.sum()) == pytest.approx(gap, abs=2e-3 + 0.02 * abs(gap))
    assert scores[0] == 0 and scores[-1] == 0  # special tokens equal their baseline


def test_evaluate_input_text(tiny):
    from rollout_core.faithfulness.evaluate import MEASURES, evaluate_input

    text = "the movie was not good"
    result = evaluate_input(tiny["bert"], text, evidence=[(14, 22)])
    from rollout_core import methods

    # every registered method that can run on it (alti_tuned needs a record of fine-tuned blocks) but the
    # attention-free references (measured when asked for), then chance
    assert list(result.table.index) == [*(m for m in methods.names() if m != "alti_tuned"
                                          and not methods.get(m).attention_free), "random"]
    assert list(result.table.columns) == list(MEASURES)
    assert result.table[["pointing_game", "mass_share", "iou"]].notna().all().all()
    assert set(result.curves["curve"]) == {"deletion", "insertion", "positive", "negative"}
    rollout = result.curves[(result.curves.method == "rollout") & (result.curves.curve == "deletion")]
    assert rollout["value"].iloc[0] == pytest.approx(result.probability)
    no_truth = evaluate_input(tiny["bert"], text, methods=["rollout"])
    assert no_truth.table["pointing_game"].isna().all()


def test_evaluate_dataset_csv_and_image_folder(tiny, tmp_path):
    from PIL import Image

    from rollout_core.faithfulness.evaluate import evaluate_dataset

    csv = tmp_path / "mine.csv"
    pd.DataFrame({"text": ["the film was great", "it was bad", "a dog sat"],
                  "label": ["positive", "0", "NEUTRAL"]}).to_csv(csv, index=False)
    calls = []
    result = evaluate_dataset(tiny["bert"], csv, methods=("rollout", "attention"), limit=2,
                              progress=lambda d, t: calls.append((d, t)))
    assert calls == [(0, 2), (1, 2), (2, 2)]
    assert result.count == 2 and len(result.per_example) == 2 * 3
    assert list(result.summary.index) == ["rollout", "attention", "random"]
    assert result.per_example["label"].tolist()[:3] == ["POSITIVE"] * 3
    assert "| rollout |" in result.markdown() and "±" in result.markdown()
    folder = tmp_path / "images"
    for label in ("circle", "square"):
        (folder / label).mkdir(parents=True)
        for i in range(2):
            Image.fromarray(np.random.default_rng(i).integers(0, 256, (32, 32, 3), dtype=np.uint8)).save(
                folder / label / f"{i}.png")
    images = evaluate_dataset(tiny["vit"], folder, methods=["rollout"], limit=3)
    assert images.per_example.drop_duplicates("example")["label"].tolist() == ["circle", "square", "circle"]
    with pytest.raises(InputError, match="label"):
        bad = tmp_path / "bad.csv"
        pd.DataFrame({"text": ["x"], "label": ["joy"]}).to_csv(bad, index=False)
        evaluate_dataset(tiny["bert"], bad)
    with pytest.raises(InputError, match="text model"):
        evaluate_dataset(tiny["vit"], "text")


def test_cli_writes_csv_and_markdown_and_reports_errors(tiny, tmp_path, capsys):
    from rollout_core.faithfulness.cli_evaluate import main

    csv = tmp_path / "d.csv"
    pd.DataFrame({"text": ["the film was great", "it was bad"], "label": ["POSITIVE", "NEGATIVE"]}).to_csv(csv)
    out = tmp_path / "out"
    assert main(["--model", tiny["bert"].source, "--dataset", str(csv), "--methods", "rollout", "--out", str(out)]) == 0
    frame = pd.read_csv(out / "d.csv")
    assert set(frame["method"]) == {"rollout", "random"} and len(frame) == 4
    assert "--methods rollout" in (out / "d.md").read_text()
    capsys.readouterr()
    assert main(["--model", tiny["bert"].source, "--dataset", str(tmp_path / "missing.csv")]) == 2
    assert main(["--dataset", "text", "--methods", "nope"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 2 and all(line.startswith("error: ") for line in err)


def test_data_seed_draws_other_generated_examples(tiny, tmp_path, capsys):
    from rollout_core.faithfulness.cli_evaluate import main
    from rollout_core.faithfulness.datasets import dataset_items

    handle = tiny["bert"]
    first, again, other = (dataset_items(handle, "text", 6, seed) for seed in (0, 0, 7))
    assert [i.input for i in first] == [i.input for i in again] == [i.input for i in dataset_items(handle, "text", 6)]
    assert not {i.input for i in first} & {i.input for i in other}
    assert all(i.evidence for i in other) and sorted(i.label for i in other) == sorted(i.label for i in first)
    out = tmp_path / "out"
    assert main(["--model", tiny["bert"].source, "--methods", "rollout", "--limit", "2", "--data-seed", "7",
                 "--out", str(out)]) == 0
    assert "--data-seed 7" in (out / "text.md").read_text()
    capsys.readouterr()
    csv = tmp_path / "d.csv"
    pd.DataFrame({"text": ["fine"], "label": ["POSITIVE"]}).to_csv(csv)
    assert main(["--model", tiny["bert"].source, "--dataset", str(csv), "--data-seed", "3"]) == 2
    assert main(["--model", tiny["bert"].source, "--data-seed", "-1"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 2 and "fixed data set" in err[0] and "--data-seed" in err[1]


def test_cli_without_dataset_uses_the_models_generated_set_and_prints_table_and_folder(tiny, tmp_path, capsys):
    from rollout_core.faithfulness.cli_evaluate import main

    out = tmp_path / "out"
    assert main(["--model", tiny["bert"].source, "--methods", "rollout", "--limit", "2", "--out", str(out)]) == 0
    frame = pd.read_csv(out / "text.csv")  # the generated text set, named "text"
    assert set(frame["method"]) == {"rollout", "random"} and len(frame) == 4
    stdout = capsys.readouterr().out
    assert "| method |" in stdout and "| rollout |" in stdout and "| random |" in stdout
    assert f"wrote text.csv and text.md to {out}" in stdout


# ----------------------------------------------------------------------------------------------
# The default models, once built (python -m rollout_core setup)


def _default(name: str):
    from rollout_core.errors import RolloutError
    from rollout_core.models.loading import load_model

    try:
        return load_model(name)
    except RolloutError as err:
        pytest.skip(f"{name} not available: {err}")


@pytest.mark.slow
@pytest.mark.timeout(900)  # minutes under load: longer than the 300 s default
@pytest.mark.parametrize("name,dataset", [("default-text", "text"), ("default-image", "image")])
def test_evaluate_dataset_on_default_models(name, dataset):
    from rollout_core.faithfulness.evaluate import evaluate_dataset

    # not every method (value zeroing alone takes minutes); images cost ~20x a sentence, so two of each
    chosen = ["rollout", "gradient", "attention", "alti"] if dataset == "text" else ["rollout", "attention"]
    count = 3 if dataset == "text" else 2
    result = evaluate_dataset(_default(name), dataset, methods=chosen, limit=count, agreement=False)
    assert result.count == count
    summary = result.summary
    assert list(summary.index) == [*chosen, "random"]
    assert summary[("pointing_game", "mean")].notna().all()
    assert summary[("deletion_auc", "mean")].between(0, 1).all()


def test_curve_figure_draws_every_method_and_the_random_baseline(tiny):
    from rollout_core.faithfulness.evaluate import evaluate_input
    from rollout_core.faithfulness.views import curve_figure

    result = evaluate_input(tiny["bert"], "the movie was not good", methods=["rollout", "attention"])
    fig = curve_figure(result, "insertion")
    names = [t.name for t in fig.data]
    assert len(names) == 3 and names[0].startswith("rollout (AUC") and names[-1].startswith("random")
    expected = result.curves.query("method == 'attention' and curve == 'insertion'")["value"].tolist()
    assert list(fig.data[1].y) == pytest.approx(expected)
    with pytest.raises(ValueError):
        curve_figure(result, "sideways")
