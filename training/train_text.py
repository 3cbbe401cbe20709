"""Fine-tune the default text model's sentiment head: `python -m training.train_text`.

all-MiniLM-L6-v2 stays frozen up to its top encoder layers; those layers, the pooler and the classifier
are trained on generated sentences (rollout_core.data.sentiment, train split), so the prediction is the
standard [CLS] -> pooler -> classifier path. Seeded; a few minutes on 2 CPU cores. Writes the trained
parameters (fp16 safetensors) and a json with the settings and held-out metrics to
rollout_core/assets/text-sentiment/, then prints the accuracies on the generated test split (disjoint words,
phrases and templates) and on both hand-written natural sets (never used for training or selection).
"""
from __future__ import annotations

import json
import time

import torch

from training.schedule import warmup_then_linear_decay
from rollout_core.build.text_model import (
    ASSET_DIR, LABELS, SETTINGS_FILE, TRAINED_FILE, base_model_dir, base_state_dict, classifier_config,
)
from rollout_core.calibration import classifier_ece, fit_temperature
from rollout_core.data import sentiment

SETTINGS = {
    "seed": 0,
    "train_sentences": 8000,
    "validation_sentences": 1000,
    "test_sentences": 2000,
    "trained_layers": [3, 4, 5],
    "epochs": 3,
    "batch_size": 32,
    "learning_rate": 1.5e-4,
    "weight_decay": 0.01,
    "warmup_fraction": 0.06,
    "storage_dtype": "float16",
    "threads": 2,
    "calibration_seed": 1,  # temperature fitted on validation-split sentences of this seed (training uses `seed`)
    "calibration_sentences": 1000,
}


def trained_prefixes(layers: list[int]) -> tuple[str, ...]:
    return tuple(f"bert.encoder.layer.{i}." for i in layers) + ("bert.pooler.", "classifier.")


def make_model(settings: dict):
    """BertForSequenceClassification with the package weights and a seeded fresh classifier."""
    from transformers import AutoTokenizer, BertForSequenceClassification

    base = base_model_dir()
    torch.manual_seed(settings["seed"])
    model = BertForSequenceClassification(classifier_config(base))
    missing, unexpected = model.load_state_dict(base_state_dict(base), strict=False)
    if unexpected or any(not key.startswith("classifier.") for key in missing):
        raise RuntimeError(f"base weights do not fit: missing {missing}, unexpected {unexpected}")
    prefixes = trained_prefixes(settings["trained_layers"])
    for name, param in model.named_parameters():
        param.requires_grad = name.startswith(prefixes)
    return model, AutoTokenizer.from_pretrained(base)


@torch.no_grad()
def logits_of(model, tokenizer, texts: list[str], batch_size: int = 64) -> torch.Tensor:
    model.eval()
    out = []
    for start in range(0, len(texts), batch_size):
        out.append(model(**tokenizer(texts[start:start + batch_size], padding=True, return_tensors="pt")).logits)
    return torch.cat(out)


def positive_probabilities(model, tokenizer, texts: list[str]) -> torch.Tensor:
    return logits_of(model, tokenizer, texts).softmax(-1)[:, LABELS.index("POSITIVE")]


def label_tensor(examples: list[sentiment.TextExample]) -> torch.Tensor:
    return torch.tensor([LABELS.index(e.label) for e in examples])


def accuracy(model, tokenizer, examples: list[sentiment.TextExample]) -> float:
    predicted = logits_of(model, tokenizer, [e.text for e in examples]).argmax(-1)
    return (predicted == label_tensor(examples)).float().mean().item()


def calibration(model, tokenizer, settings: dict, held_out: dict[str, list[sentiment.TextExample]]) -> dict:
    """Temperature fitted (NLL) on generated validation-split sentences of the calibration seed, and the
    10-bin ECE of every `held_out` set before (T=1) and after it."""
    fit_on = sentiment.generate(settings["calibration_sentences"], seed=settings["calibration_seed"], split="validation")
    temperature = fit_temperature(logits_of(model, tokenizer, [e.text for e in fit_on]), label_tensor(fit_on))
    out: dict = {"temperature": temperature}
    for name, examples in held_out.items():
        logits, labels = logits_of(model, tokenizer, [e.text for e in examples]), label_tensor(examples)
        out[f"{name}_ece_before"] = classifier_ece(logits, labels)
        out[f"{name}_ece_after"] = classifier_ece(logits, labels, temperature)
    return out


def run_layers(model, hidden: torch.Tensor, mask: torch.Tensor, layers: slice) -> torch.Tensor:
    """Apply encoder `layers` to padded `hidden` (B, n, d) with a (B, n) bool mask of real tokens."""
    additive = torch.zeros(mask.shape, dtype=hidden.dtype).masked_fill(~mask, torch.finfo(hidden.dtype).min)
    for layer in model.bert.encoder.layer[layers]:
        hidden = layer(hidden, attention_mask=additive[:, None, None, :])
        hidden = hidden[0] if isinstance(hidden, tuple) else hidden
    return hidden


@torch.no_grad()
def frozen_features(model, tokenizer, texts: list[str], frozen_layers: int, batch_size: int = 64) -> list[torch.Tensor]:
    """Hidden states after the frozen layers, one (tokens, hidden) tensor per text, computed once.

    The frozen part runs in eval mode (no dropout), so these are exactly its states in the full model.
    """
    model.eval()
    out = []
    for start in range(0, len(texts), batch_size):
        batch = tokenizer(texts[start:start + batch_size], padding=True, return_tensors="pt")
        mask = batch["attention_mask"].bool()
        hidden = model.bert.embeddings(input_ids=batch["input_ids"], token_type_ids=batch["token_type_ids"])
        hidden = run_layers(model, hidden, mask, slice(0, frozen_layers))
        out += [state[real] for state, real in zip(hidden, mask)]
    return out


def top_logits(model, features: list[torch.Tensor], frozen_layers: int) -> torch.Tensor:
    """The trained part of the model (top encoder layers, pooler, classifier) on cached features."""
    hidden = torch.nn.utils.rnn.pad_sequence(features, batch_first=True)
    lengths = torch.tensor([len(f) for f in features])
    mask = torch.arange(hidden.shape[1])[None, :] < lengths[:, None]
    hidden = run_layers(model, hidden, mask, slice(frozen_layers, None))
    return model.classifier(model.dropout(model.bert.pooler(hidden)))


def _check_top_path(model, tokenizer, texts: list[str], frozen_layers: int) -> None:
    """The cached path must reproduce the full model's logits, or training would fit something else."""
    model.eval()
    with torch.no_grad():
        full = model(**tokenizer(texts, padding=True, return_tensors="pt")).logits
        top = top_logits(model, frozen_features(model, tokenizer, texts, frozen_layers), frozen_layers)
    if not torch.allclose(full, top, atol=1e-4):
        raise RuntimeError(f"cached top-layer path differs from the full model by {(full - top).abs().max():.2e}")


def _set_train_mode(model, frozen_layers: int) -> None:
    """Dropout only where parameters train."""
    model.train()
    model.bert.embeddings.eval()
    for layer in model.bert.encoder.layer[:frozen_layers]:
        layer.eval()


def train(settings: dict = SETTINGS) -> tuple[dict[str, torch.Tensor], dict]:
    """Train; return the trained parameters (rounded to the storage dtype) and the metrics."""
    torch.set_num_threads(settings["threads"])
    started = time.perf_counter()
    model, tokenizer = make_model(settings)
    seed, frozen = settings["seed"], min(settings["trained_layers"])
    train_set = sentiment.generate(settings["train_sentences"], seed=seed, split="train")
    validation = sentiment.generate(settings["validation_sentences"], seed=seed, split="validation")
    _check_top_path(model, tokenizer, [e.text for e in validation[:8]], frozen)
    features = frozen_features(model, tokenizer, [e.text for e in train_set], frozen)
    labels = torch.tensor([LABELS.index(e.label) for e in train_set])
    params = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(params, lr=settings["learning_rate"], weight_decay=settings["weight_decay"])
    steps = settings["epochs"] * -(-len(train_set) // settings["batch_size"])
    schedule = warmup_then_linear_decay(optimizer, steps, settings["warmup_fraction"])
    generator = torch.Generator().manual_seed(seed)
    history = []
    for epoch in range(settings["epochs"]):
        _set_train_mode(model, frozen)
        order = torch.randperm(len(train_set), generator=generator)
        total = 0.0
        for start in range(0, len(order), settings["batch_size"]):
            idx = order[start:start + settings["batch_size"]]
            logits = top_logits(model, [features[i] for i in idx], frozen)
            loss = torch.nn.functional.cross_entropy(logits, labels[idx])
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            schedule.step()
            total += loss.item() * len(idx)
        history.append({"epoch": epoch + 1, "train_loss": round(total / len(order), 4),
                        "validation_accuracy": accuracy(model, tokenizer, validation)})
        print(f"epoch {epoch + 1}: {history[-1]} ({time.perf_counter() - started:.0f} s)", flush=True)
    dtype = getattr(torch, settings["storage_dtype"])
    prefixes = trained_prefixes(settings["trained_layers"])
    trained = {k: v.detach().to(dtype).contiguous() for k, v in model.state_dict().items() if k.startswith(prefixes)}
    model.load_state_dict({k: v.float() for k, v in trained.items()}, strict=False)  # measure what is stored
    test = sentiment.generate(settings["test_sentences"], seed=seed, split="test")
    check = sentiment.EXAMPLE_SENTENCES[0]
    metrics = {
        "validation_accuracy": accuracy(model, tokenizer, validation),
        "test_accuracy": accuracy(model, tokenizer, test),
        **{f"test_accuracy_{part}": accuracy(model, tokenizer,
                                             [e for e in test if sentiment.decided_by_implied(e) == implied])
           for part, implied in (("polar", False), ("implied", True))},
        **{f"{name}_accuracy": accuracy(model, tokenizer, sentiment.natural(path))
           for name, path in sentiment.NATURAL_SETS.items()},
        "mixed_reviews_accuracy": accuracy(model, tokenizer, sentiment.mixed_reviews()),
        "calibration": calibration(model, tokenizer, settings,
                                   {"test": test, "natural_blind": sentiment.natural(sentiment.NATURAL_BLIND_CSV)}),
        "history": history,
        "train_seconds": round(time.perf_counter() - started, 1),
        "check": {"text": check, "positive_probability": positive_probabilities(model, tokenizer, [check]).item()},
    }
    return trained, metrics


def main() -> None:
    import transformers
    from safetensors.torch import save_file

    trained, metrics = train(SETTINGS)
    ASSET_DIR.mkdir(parents=True, exist_ok=True)
    save_file(trained, TRAINED_FILE, metadata={"format": "pt"})
    record = {"settings": SETTINGS, "metrics": {k: v for k, v in metrics.items() if k != "check"},
              "check": metrics["check"], "versions": {"torch": torch.__version__,
                                                      "transformers": transformers.__version__}}
    SETTINGS_FILE.write_text(json.dumps(record, indent=2) + "\n")
    print(f"generated test accuracy: {metrics['test_accuracy']:.4f} ({SETTINGS['test_sentences']} sentences; "
          f"{metrics['test_accuracy_polar']:.4f} where polar words decide, {metrics['test_accuracy_implied']:.4f} "
          f"where an implied phrase does)")
    for name, path in sentiment.NATURAL_SETS.items():
        print(f"{name} set accuracy: {metrics[f'{name}_accuracy']:.4f} ({len(sentiment.natural(path))} sentences)")
    print(f"mixed reviews accuracy: {metrics['mixed_reviews_accuracy']:.4f} ({len(sentiment.mixed_reviews())} reviews)")
    print(f"calibration: {metrics['calibration']}")
    print(f"trained in {metrics['train_seconds']} s; wrote {TRAINED_FILE} ({TRAINED_FILE.stat().st_size / 1e6:.1f} MB)")


if __name__ == "__main__":
    main()
