"""Gradient x input and integrated gradients: the plain-torch maths against captum (the reference the evaluation
used before) and against hand-computed cases, and the methods explaining a padded batch through explain against
the same method's attributions of each input alone as the faithfulness evaluation prepares it."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import rollout_core as rc
from rollout_core import methods
from rollout_core.errors import RolloutError
from rollout_core.methods import grad_x_input, integrated_gradients
from rollout_core.inputs.continuous import prepare_image, prepare_text
from rollout_core.maths import attribution as maths

captum_attr = pytest.importorskip("captum.attr")


def _net() -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(12, 16), torch.nn.Tanh(), torch.nn.Linear(16, 3))


@pytest.mark.parametrize("steps,chunk", [(32, 8), (20, 6), (7, 64)])
def test_integrated_gradients_equal_captums(steps, chunk):
    net = _net()
    x, baseline = torch.randn(1, 4, 3), torch.randn(1, 4, 3)
    ours = maths.integrated_gradients(net, x, baseline, 2, steps=steps, chunk=chunk)
    theirs = captum_attr.IntegratedGradients(net).attribute(x, baselines=baseline, target=2, n_steps=steps,
                                                            internal_batch_size=chunk)
    assert torch.allclose(ours, theirs, rtol=1e-6, atol=1e-7)


def test_input_x_gradient_equals_captums():
    net = _net()
    x = torch.randn(1, 4, 3)
    assert torch.equal(maths.input_x_gradient(net, x, 1), captum_attr.InputXGradient(net).attribute(x, target=1))


def test_integrated_gradients_of_a_linear_score_by_hand():
    """A linear logit w.x: its gradient is w everywhere, so IG = (x - b) * w exactly, for any number of steps."""
    w = torch.tensor([[1.0, -2.0, 0.5]], dtype=torch.float64)

    def forward(batch):
        logit = (batch * w).sum(-1)
        return torch.stack([torch.zeros_like(logit), logit], -1)

    x = torch.tensor([[3.0, 1.0, -4.0]], dtype=torch.float64)
    b = torch.tensor([[1.0, 1.0, 1.0]], dtype=torch.float64)
    for steps in (1, 5, 32):
        ig = maths.integrated_gradients(forward, x, b, 1, steps=steps, chunk=3)
        assert ig[0].tolist() == pytest.approx([2.0, 0.0, -2.5], abs=1e-7)
        assert maths.completeness_gap(forward, x, b, 1, ig) < 1e-7  # the step sizes are float32, as in captum


def test_gauss_legendre_weights_integrate_a_cubic_exactly():
    sizes, alphas = maths.gauss_legendre(2)  # 2 points integrate polynomials up to degree 3 exactly
    assert sum(s * a ** 3 for s, a in zip(sizes, alphas)) == pytest.approx(0.25)
    with pytest.raises(ValueError):
        maths.gauss_legendre(0)


@pytest.fixture(scope="module")
def tiny(tiny_handle):
    return {k: tiny_handle(k) for k in ("bert", "vit", "sentence")}


@pytest.mark.parametrize("method", ["grad_x_input", "integrated_gradients"])
def test_registered_methods_equal_the_evaluations_references_on_text(tiny, method):
    """The method, through explain (a padded batch of two texts), equals the evaluation's reference on each text
    alone: the same continuous input, baseline and class."""
    handle = tiny["bert"]
    texts = ["the movie was not good at all", "fine"]
    reference = {"grad_x_input": grad_x_input.attribute, "integrated_gradients": integrated_gradients.attribute}
    for expl in rc.explain_texts(handle, texts, method=method):
        expected = reference[method](prepare_text(handle, expl.text), expl.prediction[0].index)
        assert expl.signed and expl.num_layers >= 1
        assert np.allclose(expl.scores, expected.numpy(), rtol=1e-5, atol=1e-6)
        if method == "integrated_gradients":
            assert expl.scores[0] == 0 and expl.scores[-1] == 0  # [CLS] and [SEP] are their own baseline


def test_integrated_gradients_on_an_image_keep_completeness(tiny):
    handle = tiny["vit"]
    image = np.random.default_rng(1).integers(0, 256, (32, 32, 3), dtype=np.uint8)
    expl = rc.explain_image(handle, image, method="integrated_gradients")
    prepared = prepare_image(handle, image)
    target = expl.prediction[0].index
    assert np.allclose(expl.scores, integrated_gradients.attribute(prepared, target).numpy(), rtol=1e-5, atol=1e-6)
    with torch.no_grad():
        change = float(prepared.forward(prepared.x)[0, target] - prepared.forward(prepared.baseline)[0, target])
    assert expl.scores.sum() == pytest.approx(change, abs=1e-3 + 0.01 * abs(change))
    assert expl.settings["ig_completeness_gap"] < 1e-3 + 0.01 * abs(change)
    assert "sum to the logit's change" in methods.get("integrated_gradients").describe(expl.settings)


def test_a_model_without_classes_is_refused_before_any_forward_pass(tiny):
    for method in ("grad_x_input", "integrated_gradients"):
        assert methods.get(method).refusal(tiny["sentence"]) is not None
        with pytest.raises(RolloutError, match="classifier"):
            rc.explain_text(tiny["sentence"], "a sentence", method=method)
