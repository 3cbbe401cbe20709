"""explain_text / explain_texts / explain_image end to end on tiny models of every family.

Expected rows are computed here from the model's own attentions (a direct forward pass) and the
maths package, not read back from explain.py."""
from __future__ import annotations

import shutil

import numpy as np
import pytest

from rollout_core.summary import summarize
import torch
from PIL import Image

from rollout_core.errors import InputError, UnsupportedModelError
from rollout_core.explain import ZERO_SHOT_TEMPERATURE, explain_image, explain_text, explain_texts
from rollout_core.maths.rollout import attention_rollout
from rollout_core.models.loading import load_model
from tiny_models import IMAGE_FAMILIES, TEXT_FAMILIES

SENTENCE = "The movie was great <b>fun</b>!"
METHODS = ("rollout", "flow", "gradient", "attention")
NO_SCORE = {"bert-encoder", "roberta-encoder", "sentence", "dinov2", "dinov2-registers"}  # nothing to differentiate
SEQ2SEQ = {"t5", "bart"}


def _picture(height: int = 40, width: int = 56) -> np.ndarray:
    return (np.random.default_rng(0).random((height, width, 3)) * 255).astype(np.uint8)


def _direct(handle, text):
    """Tokenise and run the model directly: (input_ids, attentions)."""
    enc = handle.processor(text, return_tensors="pt", split_special_tokens=True)
    with torch.no_grad():
        out = handle.model(**enc, output_attentions=True)
    return enc, out.attentions


def _check_common(e, n_layers):
    n = len(e.tokens)
    assert e.special.shape == (n,) and e.scores.shape == (n,)
    assert e.layer_scores.shape == (n_layers, n) and e.layer_attention_scores.shape == (n_layers, n)
    assert np.isfinite(e.scores).all() and np.isfinite(e.layer_scores).all()
    if e.method != "gradient":  # gradient rollout (R = I + ...) is not row-normalised
        assert abs(e.scores.sum() - 1) < 1e-5
    assert (e.scores >= 0).all()
    assert np.allclose(e.layer_scores[-1], e.scores)
    assert abs(e.display_scores().sum() - 1) < 1e-9
    for key in ("model", "method", "head_fusion", "residual_weight", "discard_ratio", "start_layer", "end_layer",
                "capture", "versions", "family", "task"):
        assert key in e.settings


@pytest.mark.parametrize("kind", TEXT_FAMILIES)
@pytest.mark.parametrize("method", METHODS)
def test_every_text_family(tiny_handle, kind, method):
    handle = tiny_handle(kind)
    if (method == "gradient" and kind in NO_SCORE) or (kind in SEQ2SEQ and method in ("flow", "gradient")):
        with pytest.raises(InputError):
            explain_text(handle, SENTENCE, method=method)
        return
    e = explain_text(handle, SENTENCE, method=method)
    _check_common(e, handle.num_layers)
    assert e.kind == "text" and e.text == SENTENCE and len(e.offsets) == len(e.tokens)
    for tok, special, (a, b) in zip(e.tokens, e.special, e.offsets):
        assert (a, b) == (0, 0) if special else SENTENCE[a:b] == tok or a == b
    assert "<b>" in "".join(e.display_tokens()) or "<" in e.display_tokens()  # markup kept as text
    if method != "flow":
        assert e.matrix.shape == (len(e.tokens),) * 2
    if handle.task in ("text-classification",):
        assert e.prediction[0].label in handle.labels and e.target == e.prediction[0].label
    if handle.task == "causal-lm":
        assert e.target == len(e.tokens) - 1 and len(e.prediction) == 5
    if kind in SEQ2SEQ:
        assert {"decoder_tokens", "decoder_to_source", "generated_text"} <= set(e.extras)


@pytest.mark.parametrize("kind", IMAGE_FAMILIES)
@pytest.mark.parametrize("method", METHODS)
def test_every_image_family(tiny_handle, kind, method):
    handle = tiny_handle(kind)
    if method == "gradient" and kind in NO_SCORE:
        with pytest.raises(InputError, match="gradient"):
            explain_image(handle, _picture(), method=method)
        return
    e = explain_image(handle, _picture(), method=method)
    _check_common(e, handle.num_layers)
    rows, cols = e.grid
    assert e.score_map().shape == (rows, cols) and abs(e.score_map().sum() - 1) < 1e-9
    assert e.image.dtype == np.uint8 and e.image.shape == (8 * rows, 8 * cols, 3)
    assert e.special.sum() == len(e.tokens) - rows * cols
    assert (e.matrix is None) == (method == "flow")


def test_explained_rows_are_the_heads_pooling(tiny_handle):
    """[CLS] row for BERT, last token for GPT-2, mean of all real rows for the sentence encoder."""
    for kind, row in (("bert", lambda r: r[0]), ("gpt2", lambda r: r[-1]), ("sentence", lambda r: r.mean(0))):
        handle = tiny_handle(kind)
        _, atts = _direct(handle, "the cat sat on the mat")
        expected = row(attention_rollout(atts)[0].double()).numpy()
        e = explain_text(handle, "the cat sat on the mat", method="rollout")
        assert np.allclose(e.scores, expected, atol=1e-6), kind


def test_image_rows_deit_and_beit(tiny_handle):
    picture = _picture()
    for kind, row in (("deit", lambda r: r[:2].mean(0)), ("beit", lambda r: r[1:].mean(0)),
                      ("dinov2-registers", lambda r: r[0])):
        handle = tiny_handle(kind)
        pixels = handle.processor(images=Image.fromarray(picture), return_tensors="pt")["pixel_values"]
        with torch.no_grad():
            atts = handle.model(pixel_values=pixels, output_attentions=True).attentions
        e = explain_image(handle, picture, method="rollout")
        assert np.allclose(e.scores, row(attention_rollout(atts)[0].double()).numpy(), atol=1e-6), kind


def test_shown_map_excludes_special_positions(tiny_handle):
    e = explain_text(tiny_handle("bert"), "the cat sat")
    assert e.tokens[0] == "[CLS]" and e.tokens[-1] == "[SEP]"
    assert e.display_tokens() == ["the", "cat", "sat"]
    assert np.allclose(e.display_scores(), e.scores[1:-1] / e.scores[1:-1].sum())
    deit = explain_image(tiny_handle("deit"), _picture())
    assert deit.display_positions()[0] == 2 and not deit.special[2:].any()
    regs = explain_image(tiny_handle("dinov2-registers"), _picture())
    assert regs.special[:3].all() and regs.patch_positions[0] == 3


def test_user_typed_special_tokens_are_plain_text(tiny_handle):
    e = explain_text(tiny_handle("bert"), "the [SEP] cat")
    assert e.special.sum() == 2  # only the tokenizer's own [CLS] and [SEP]


def test_non_square_image_grid_and_processed_image(tiny_handle):
    handle = tiny_handle("vit-wide")  # processor resizes to 32 x 48 (height x width)
    picture = _picture(64, 96)
    e = explain_image(handle, picture)
    assert e.grid == (4, 6) and e.tokens[1:8] == [f"patch 0,{c}" for c in range(6)] + ["patch 1,0"]
    assert e.patch_positions.tolist() == list(range(1, 25))
    resized = np.asarray(Image.fromarray(picture).resize((48, 32), Image.BILINEAR))
    assert e.image.shape == (32, 48, 3)
    assert np.abs(e.image.astype(int) - resized.astype(int)).max() <= 1
    assert np.allclose(e.score_map().ravel(), e.scores[1:] / e.scores[1:].sum())


@pytest.mark.parametrize("kind", ["bert", "gpt2", "sentence", "roberta"])
@pytest.mark.parametrize("method", ["rollout", "gradient", "attention", "flow"])
def test_batch_equals_one_by_one(tiny_handle, kind, method):
    handle = tiny_handle(kind)
    if method == "gradient" and kind in NO_SCORE:
        return
    texts = ["the cat sat on the mat and the dog ran", "a bad film", "i loved it"]
    batch = explain_texts(handle, texts, method=method)
    for text, got in zip(texts, batch):
        alone = explain_text(handle, text, method=method)
        assert got.tokens == alone.tokens
        assert np.allclose(got.scores, alone.scores, atol=1e-6)
        assert np.allclose(got.layer_scores, alone.layer_scores, atol=1e-6)
        assert np.allclose(got.layer_attention, alone.layer_attention, atol=1e-6)
        if got.matrix is not None:
            assert np.allclose(got.matrix, alone.matrix, atol=1e-6)
        assert got.target == alone.target


def test_gradient_changes_with_target_and_rollout_does_not(tiny_handle):
    handle = tiny_handle("bert")
    neg = explain_text(handle, SENTENCE, method="gradient", target="NEGATIVE")
    pos = explain_text(handle, SENTENCE, method="gradient", target=2)
    assert neg.target == "NEGATIVE" and pos.target == "POSITIVE"
    assert not np.allclose(neg.scores, pos.scores, atol=1e-7)
    r_neg = explain_text(handle, SENTENCE, method="rollout", target="NEGATIVE")
    r_pos = explain_text(handle, SENTENCE, method="rollout", target="POSITIVE")
    assert np.allclose(r_neg.scores, r_pos.scores)
    with pytest.raises(InputError, match="unknown target"):
        explain_text(handle, SENTENCE, target="CHEERFUL")


def test_causal_target_position(tiny_handle):
    handle = tiny_handle("gpt2")
    e = explain_text(handle, "the cat sat on the mat", target=2)
    assert e.target == 2 and np.all(e.scores[3:] == 0)  # causal: nothing after the position
    with pytest.raises(InputError, match="position"):
        explain_text(handle, "the cat", target=99)


def test_zero_shot_labels_against_independent_pooling(tiny_handle):
    handle = tiny_handle("sentence")
    labels = ["good", "bad", "cat"]

    def embed(text):
        enc = handle.processor(text, return_tensors="pt")
        with torch.no_grad():
            hidden = handle.model(**enc).last_hidden_state[0]
        v = hidden.mean(0)
        return v / v.norm()

    text_vector = embed("the cat sat")
    sims = torch.stack([text_vector @ embed(x) for x in labels])
    expected = torch.softmax(sims / ZERO_SHOT_TEMPERATURE, 0)
    e = explain_text(handle, "the cat sat", labels=labels)
    got = {p.label: p.probability for p in e.prediction}
    for label, p in zip(labels, expected.tolist()):
        assert abs(got[label] - p) < 1e-5
    assert e.target == max(got, key=got.get)
    similarity = {p.label: p.similarity for p in e.prediction}  # shown instead of the softmax share
    for label, s in zip(labels, sims.tolist()):
        assert abs(similarity[label] - s) < 1e-5
    assert "cosine similarity" in summarize(e) and "%)" not in summarize(e).split(":")[0]
    with pytest.raises(InputError, match="sentence encoder"):
        explain_text(tiny_handle("bert"), "x", labels=labels)


def test_zero_shot_gradients_read_the_similarities_without_a_warning(tiny_handle):
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")  # torch warned "Converting a tensor with requires_grad=True to a scalar"
        e = explain_text(tiny_handle("sentence"), "the cat sat", labels=["good", "bad"], method="gradient")
    assert all(isinstance(p.similarity, float) for p in e.prediction)


@pytest.mark.parametrize("text", ["", "   \n\t "])
def test_empty_text_refused(tiny_handle, text):
    with pytest.raises(InputError, match="empty"):
        explain_text(tiny_handle("bert"), text)


@pytest.mark.parametrize("text", ["!!! ??? ...", "🙂 日本語 and English", "<script>alert(1)</script>"])
def test_unusual_text_is_fine(tiny_handle, text):
    e = explain_text(tiny_handle("roberta"), text)
    assert e.text == text and abs(e.scores.sum() - 1) < 1e-5


def test_long_text_truncated_with_record(tiny_handle):
    handle = tiny_handle("bert")
    text = "the cat sat on the mat. " * 4200  # ~100,000 characters
    e = explain_text(handle, text)
    limit = handle.processor.model_max_length
    assert len(e.tokens) == limit
    t = e.truncation
    offsets = handle.processor(text[:1000], return_offsets_mapping=True)["offset_mapping"]
    assert t["total_chars"] == len(text) and t["kept_tokens"] == limit
    assert t["kept_chars"] == offsets[limit - 2][1]  # end of the last real token kept ([SEP] follows)
    assert text.startswith(e.text) and len(e.text) == t["kept_chars"]
    assert explain_text(handle, "the cat sat").truncation is None


@pytest.mark.parametrize("options, message", [
    (dict(method="saliency"), "unknown method"),
    (dict(head_fusion="median"), "head fusion"),
    (dict(discard_ratio=1.0), "discard_ratio"),
    (dict(residual_weight=-1), "residual_weight"),
    (dict(residual_weight=float("nan")), "residual_weight"),
    (dict(start_layer=1, end_layer=1), "greater than"),
    (dict(start_layer=5), "out of range"),
    (dict(capture="lowmem", method="flow"), "rollout"),
])
def test_options_validated(tiny_handle, options, message):
    with pytest.raises(InputError, match=message):
        explain_text(tiny_handle("bert"), "the cat", **options)


def test_layer_range(tiny_handle):
    handle = tiny_handle("roberta")  # 3 layers
    e = explain_text(handle, "the cat", start_layer=1, end_layer=3)
    assert e.layer_scores.shape[0] == 2 and e.layer_attention.shape[0] == 2
    assert e.settings["start_layer"] == 1 and e.settings["end_layer"] == 3


def test_lowmem_capture_matches_full(tiny_handle, monkeypatch):
    handle = tiny_handle("bert")
    full = explain_text(handle, SENTENCE, method="rollout", capture="full")
    low = explain_text(handle, SENTENCE, method="rollout", capture="lowmem")
    assert low.settings["capture"] == "lowmem" and full.settings["capture"] == "full"
    assert np.allclose(full.scores, low.scores, atol=1e-5)
    assert np.allclose(full.layer_scores, low.layer_scores, atol=1e-5)
    monkeypatch.setenv("ROLLOUT_MEMORY_BUDGET_MB", "0.0001")
    assert explain_text(handle, SENTENCE, method="rollout").settings["capture"] == "lowmem"



@pytest.mark.parametrize("kind", ["bert", "vit"])
def test_a_failing_model_reads_the_same_on_both_captures(tiny_handle, kind):
    """A model whose own code raises mid-forward: UnsupportedModelError with the same message either way."""
    handle = tiny_handle(kind)
    layer = next(m for m in handle.model.modules() if type(m).__name__.endswith("Layer"))  # the first block

    def broken(module, args, output):
        raise RuntimeError("shape mismatch in a custom layer")

    hook = layer.register_forward_hook(broken)
    messages = {}
    try:
        for mode in ("full", "lowmem"):
            with pytest.raises(UnsupportedModelError) as err:
                if kind == "bert":
                    explain_text(handle, SENTENCE, capture=mode)
                else:
                    explain_image(handle, np.zeros((32, 32, 3), dtype=np.uint8), capture=mode)
            messages[mode] = str(err.value)
    finally:
        hook.remove()
    assert messages["full"] == messages["lowmem"] == "the model failed on this input: shape mismatch in a custom layer"


def test_settings_hold_every_option_as_it_ran(tiny_handle):
    """Explanation.settings has each Options field, resolved: a negative start counted from the end, the default
    end the last layer, "auto" the capture actually used."""
    import dataclasses

    from rollout_core.options import Options

    handle = tiny_handle("bert")
    e = explain_text(handle, SENTENCE, method="rollout", head_fusion="max", residual_weight=0.5, discard_ratio=0.25,
                     start_layer=-2, keep_heads=True)
    layers = handle.num_layers
    expected = {"method": "rollout", "head_fusion": "max", "residual_weight": 0.5, "discard_ratio": 0.25,
                "start_layer": layers - 2, "end_layer": layers, "keep_heads": True, "capture": "full",
                    "full_matrix": False}
    assert {f.name for f in dataclasses.fields(Options)} == set(expected)
    assert {key: e.settings[key] for key in expected} == expected

def test_keep_heads(tiny_handle):
    handle = tiny_handle("llama")  # grouped-query attention: 4 query heads, 2 key/value heads
    e = explain_text(handle, "the cat sat", keep_heads=True)
    n = len(e.tokens)
    assert e.head_attention.shape == (2, 4, n, n)
    assert np.allclose(e.head_attention.mean(1), e.layer_attention, atol=1e-6)


def test_nan_attention_is_a_clear_error(tiny_model_dir, tmp_path):
    folder = shutil.copytree(tiny_model_dir("vit"), tmp_path / "vit-nan")
    handle = load_model(folder)
    with torch.no_grad():
        handle.model.vit.layers[1].attention.q_proj.weight.fill_(float("nan"))
    with pytest.raises(UnsupportedModelError, match="NaN"):
        explain_image(handle, _picture())


def test_modality_mismatch(tiny_handle):
    with pytest.raises(InputError, match="explain_image"):
        explain_text(tiny_handle("vit"), "a cat")


def test_threads_sharing_handles_get_their_own_results(tiny_handle):
    """Several threads explaining with shared (cached) handles get exactly the sequential results."""
    import threading

    jobs = [("bert", "the cat sat", "gradient"), ("gpt2", "a bad film was not fun", "rollout"),
            ("vit", None, "rollout"), ("bert", "i loved it", "rollout"),
            # methods whose hooks record or rewrite the shared model's forward pass
            ("bert", "the food was cold", "alti"), ("bert", "it was fine", "value_zeroing"),
            ("vit", None, "norm"), ("bert", "a good day", "attnlrp")] * 2
    run = lambda kind, text, method: (  # noqa: E731
        explain_image(tiny_handle(kind), _picture(), method=method) if text is None
        else explain_text(tiny_handle(kind), text, method=method))
    expected = [run(*job).scores for job in jobs]
    got: dict[int, np.ndarray] = {}
    threads = [threading.Thread(target=lambda i=i, job=job: got.__setitem__(i, run(*job).scores))
               for i, job in enumerate(jobs)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert all(np.allclose(got[i], expected[i], atol=1e-9) for i in range(len(jobs)))


def test_image_sources_agree(tiny_handle, tmp_path):
    """A path, the file's bytes, a PIL image and an array give the same explanation."""
    import io

    picture = _picture()
    path = tmp_path / "x.png"
    Image.fromarray(picture).save(path)
    sources = [path, str(path), path.read_bytes(), Image.fromarray(picture), picture, io.BytesIO(path.read_bytes())]
    results = [explain_image(tiny_handle("vit"), s).scores for s in sources]
    assert all(np.allclose(r, results[0], atol=1e-9) for r in results)
    with pytest.raises(InputError):
        explain_image(tiny_handle("vit"), b"not an image")
