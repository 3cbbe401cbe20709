"""Issues 17 and 29: the batched evaluation (perturbed inputs in batches on the scoring copy of the model, shared
between methods, the prediction taken from the first explanation) gives the numbers of a naive loop that scores one
perturbed input at a time on the model as loaded, written here from the protocol's definition, on either grid
(tenths, the full protocol; fifths; quarters, an image's default)."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import torch

from rollout_core.errors import InputError
from rollout_core.explain import explain_image, explain_text
from rollout_core.faithfulness.evaluate import evaluate_input
from rollout_core.inputs.continuous import scoring_model

METHODS = ("rollout", "attention", "gradient")
SEEDS = 2
GRIDS = {"tenths": [i / 10 for i in range(11)], "fifths": [i / 5 for i in range(6)],
         "quarters": [i / 4 for i in range(5)]}


def _trapezoid(values: list[float], grid: list[float]) -> float:
    return sum((grid[i + 1] - grid[i]) * (values[i + 1] + values[i]) / 2 for i in range(len(values) - 1))


def _naive(probs_of, n: int, removable: list[int], vectors: dict[str, list[np.ndarray]],
           grid: list[float] = GRIDS["tenths"]) -> dict[str, dict]:
    """Per method: the four AUCs and curves on `grid` (Chefer's: its points up to 0.9), one forward per perturbed
    input (`probs_of(removed set)`)."""
    full = probs_of(set())
    target = int(np.argmax(full))
    out = {}
    for method, vs in vectors.items():
        runs = []
        for v in vs:
            order = sorted(removable, key=lambda i: (-v[i], i))
            m = len(order)
            curves = {"deletion": [], "insertion": [], "positive": [], "negative": []}
            for f in grid:
                k = int(round(f * m))
                curves["deletion"].append(probs_of(set(order[:k]))[target])
                curves["insertion"].append(probs_of(set(order[k:]))[target])
                if f <= 0.9 + 1e-9:
                    curves["positive"].append(float(np.argmax(probs_of(set(order[:k]))) == target))
                    curves["negative"].append(float(np.argmax(probs_of(set(order[::-1][:k]))) == target))
            auc = {c: _trapezoid(y, grid[: len(y)]) * (1 if c in ("deletion", "insertion") else 100)
                   for c, y in curves.items()}
            runs.append((auc, curves))
        out[method] = {"auc": {c: np.mean([a[c] for a, _ in runs]) for c in runs[0][0]},
                       "curves": {c: np.mean([cv[c] for _, cv in runs], axis=0) for c in runs[0][1]}}
    return out


def _vectors(explanations: dict, n: int) -> dict[str, list[np.ndarray]]:
    vectors = {m: [np.asarray(e.scores, dtype=np.float64)] for m, e in explanations.items()}
    vectors["random"] = [torch.rand(n, generator=torch.Generator().manual_seed(s), dtype=torch.float64).numpy()
                         for s in range(SEEDS)]
    return vectors


def _compare(result, expected: dict) -> None:
    for method, want in expected.items():
        for curve, auc in want["auc"].items():
            assert result.table.loc[method, f"{curve}_auc"] == pytest.approx(auc, abs=1e-6), (method, curve)
            got = result.curves.query("method == @method and curve == @curve")["value"].to_numpy()
            # single points: float32 rounding of a 6-layer forward (batched, fused attention) reaches 1e-5 relative
            np.testing.assert_allclose(got, want["curves"][curve], rtol=2e-5, atol=1e-6, err_msg=f"{method} {curve}")


def _text_case(handle, text: str, batch_size: int | None, grid: str | None = None) -> dict:
    result = evaluate_input(handle, text, METHODS, seeds=SEEDS, batch_size=batch_size, grid=grid)
    assert result.grid == (grid or "tenths")  # text's default: the full protocol
    ids = handle.processor(text, return_tensors="pt")["input_ids"][0]
    mask_id = handle.processor.mask_token_id

    def probs_of(removed: set[int]) -> np.ndarray:
        masked = ids.clone()
        masked[sorted(removed)] = mask_id
        with torch.no_grad():
            logits = handle.model(input_ids=masked[None], attention_mask=torch.ones_like(masked[None])).logits
        return torch.softmax(logits.float(), -1)[0].double().numpy()

    target = int(np.argmax(probs_of(set())))
    explanations = {m: explain_text(handle, text, method=m, target=target) for m in METHODS}
    n = len(ids)
    expected = _naive(probs_of, n, list(range(1, n - 1)), _vectors(explanations, n), GRIDS[result.grid])
    _compare(result, expected)
    assert result.probability == pytest.approx(probs_of(set())[target], abs=1e-6)
    assert result.baseline.name == "mask" and result.baseline.passed  # the loop's removal: [MASK]
    return expected


@pytest.mark.parametrize(("batch_size", "grid"), [(5, None), (None, None), (None, "fifths")])
def test_batched_text_evaluation_equals_a_one_input_at_a_time_loop(tiny_handle, batch_size, grid):
    # batch 5: several batches per curve set; None (the default): every perturbation in one pass
    _text_case(tiny_handle("bert"), "the film was great but the ending was bad and slow", batch_size, grid)


def test_by_default_every_perturbation_of_every_method_goes_in_one_pass(tiny_handle, monkeypatch):
    from rollout_core.inputs import continuous as scoring

    handle, text = tiny_handle("bert"), "the film was great but the ending was bad and slow"
    passes: list[int] = []
    real = scoring.PreparedInput.probabilities
    monkeypatch.setattr(scoring.PreparedInput, "probabilities",
                        lambda self, keep: passes.append(len(keep)) or real(self, keep))
    result = evaluate_input(handle, text, METHODS, seeds=SEEDS)
    # per ordering at most 9 inner deletion, insertion and negative-perturbation masks (positive perturbation is
    # deletion), plus all kept and all removed, shared by every ordering
    orderings = len(METHODS) + SEEDS
    # the all-removed input first (the baseline's check, an end point), then the rest; the unperturbed input's
    # probabilities come from its explanation's forward pass, not scored again
    assert passes == [1, result.scored - 1] and result.passes == 2 and result.scored <= orderings * 27 + 1
    assert result.scored > 27 + 1  # the orderings differ: many distinct rows, still one pass
    scored = scoring.prepare_text(handle, text).probabilities(torch.ones(1, len(result.explanations["rollout"].tokens),
                                                                         dtype=torch.bool))
    assert result.probability == pytest.approx(float(scored.max()), abs=1e-6)  # the same number, scored or not


def test_an_explanation_without_logits_has_the_unperturbed_input_scored(tiny_handle, monkeypatch):
    from rollout_core.inputs import continuous as scoring

    handle, text = tiny_handle("bert"), "the film was great but the ending was bad and slow"
    plain = evaluate_input(handle, text, METHODS)
    page = explain_text(handle, text, method="rollout")
    page.logits = None  # e.g. an explanation kept from before explanations carried them
    passes: list[int] = []
    real = scoring.PreparedInput.probabilities
    monkeypatch.setattr(scoring.PreparedInput, "probabilities",
                        lambda self, keep: passes.append(len(keep)) or real(self, keep))
    reused = evaluate_input(handle, text, METHODS, explanations={"rollout": page})
    assert passes[0] == 2 and reused.scored == plain.scored + 1
    pd.testing.assert_frame_equal(reused.table, plain.table, rtol=0, atol=1e-6)


def test_an_explanation_given_is_used_and_gives_the_same_figures(tiny_handle, monkeypatch):
    import rollout_core.explain as explain_module

    handle, text = tiny_handle("bert"), "the film was great but the ending was bad and slow"
    plain = evaluate_input(handle, text, METHODS)
    page = explain_text(handle, text, method="rollout")
    made: list[list[str]] = []
    real = explain_module.explain_methods
    monkeypatch.setattr(explain_module, "explain_methods", lambda h, x, names, **k: made.append(names) or real(
        h, x, names, **k))
    reused = evaluate_input(handle, text, METHODS, explanations={"rollout": page})
    assert made == [["attention", "gradient"]] and reused.explanations["rollout"] is page
    pd.testing.assert_frame_equal(reused.table, plain.table, rtol=0, atol=1e-12)
    assert reused.probability == pytest.approx(plain.probability, abs=1e-7)


@pytest.mark.slow
def test_batched_evaluation_on_default_text_equals_the_loop_where_the_prediction_flips():
    from rollout_core.errors import RolloutError
    from rollout_core.models.loading import load_model

    try:
        handle = load_model("default-text")
    except RolloutError as err:
        pytest.skip(f"default-text not available: {err}")
    expected = _text_case(handle, "The food was great but the service was terrible.", 64)
    flips = [c for w in expected.values() for name in ("positive", "negative") for c in w["curves"][name] if c < 1]
    assert flips  # the accuracy curves are not constant here, so they are compared too


@pytest.mark.parametrize("grid", [None, "fifths", "tenths"])
def test_batched_image_evaluation_equals_a_one_input_at_a_time_loop(tiny_handle, grid):
    handle = tiny_handle("vit")
    image = np.random.default_rng(3).integers(0, 256, (32, 32, 3), dtype=np.uint8)
    result = evaluate_input(handle, image, METHODS, seeds=SEEDS, grid=grid)
    assert result.grid == (grid or "quarters")  # an image's default: quarters; the others when asked
    pixels = handle.processor(images=image, return_tensors="pt")["pixel_values"]
    size = handle.config.patch_size
    cols = pixels.shape[-1] // size
    mean = pixels.mean(dim=(2, 3))[0]

    def probs_of(removed: set[int]) -> np.ndarray:
        x = pixels.clone()
        for p in removed:  # position p >= 1: patch p - 1 in row-major order, filled with the mean colour
            r, c = divmod(p - 1, cols)
            x[0, :, r * size:(r + 1) * size, c * size:(c + 1) * size] = mean[:, None, None]
        with torch.no_grad():
            return torch.softmax(handle.model(pixel_values=x).logits.float(), -1)[0].double().numpy()

    target = int(np.argmax(probs_of(set())))
    explanations = {m: explain_image(handle, image, method=m, target=target) for m in METHODS}
    n = 1 + cols * cols
    expected = _naive(probs_of, n, list(range(1, n)), _vectors(explanations, n), GRIDS[result.grid])
    assert result.baseline.name == "mean"  # the loop's removal: the mean colour
    _compare(result, expected)


def test_the_scoring_copy_shares_the_weights_and_leaves_the_model_eager(tiny_handle):
    model = tiny_handle("bert").model
    fast = scoring_model(model)
    assert fast is scoring_model(model)  # made once
    assert model.config._attn_implementation == "eager"
    assert fast.config._attn_implementation == "sdpa"
    assert [p.data_ptr() for p in fast.parameters()] == [p.data_ptr() for p in model.parameters()]


@pytest.mark.parametrize("bad", [0, -3, 2.5, True, "8"])
def test_a_bad_batch_size_is_a_clear_error(tiny_handle, bad):
    with pytest.raises(InputError, match="batch_size"):
        evaluate_input(tiny_handle("bert"), "a good film", ("rollout",), batch_size=bad)
