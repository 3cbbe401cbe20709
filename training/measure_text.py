"""Measure a sentiment model folder on the hand-written sets: `python -m training.measure_text [FOLDER]`.

Prints one json object: accuracy on each hand-written set (the issue-27 blind reviews, the two older natural sets,
the mixed reviews, the tunable validation reviews), the calibrated confidence of the blind set's misses, its 10-bin
ECE before and after the folder's temperature, and the top probability on the neutral statements. FOLDER defaults
to the built default-text model. Probabilities are softmax(logits / T) with T from the folder's config (1 if none),
as every page shows them.
"""
from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path

import torch

from rollout_core.calibration import classifier_ece, config_temperature
from rollout_core.data import sentiment_sets as sets


@torch.no_grad()
def logits_of(model, tokenizer, texts: list[str], batch_size: int = 32) -> torch.Tensor:
    out = [model(**tokenizer(texts[i:i + batch_size], padding=True, truncation=True, return_tensors="pt")).logits
           for i in range(0, len(texts), batch_size)]
    return torch.cat(out).float()


def measure(model, tokenizer, temperature: float = 1.0, uncertain_below: float | None = None) -> dict:
    """The figures of docs/MODELS.md for `model` (a two-label NEGATIVE/POSITIVE sequence classifier); with an
    uncertain band, also the share of each set's predictions inside it ("uncertain")."""
    index = {label: i for i, label in model.config.id2label.items()}
    positive = index.get(sets.POSITIVE, index.get("POSITIVE"))

    def labelled(examples: list[sets.TextExample]) -> tuple[torch.Tensor, torch.Tensor]:
        labels = torch.tensor([positive if e.label == sets.POSITIVE else 1 - positive for e in examples])
        return logits_of(model, tokenizer, [e.text for e in examples]), labels

    out: dict = {"temperature": temperature}
    named = {"reviews_blind": sets.mixed_reviews(sets.REVIEWS_BLIND_CSV), "natural": sets.natural(sets.NATURAL_CSV),
             "natural_blind": sets.natural(sets.NATURAL_BLIND_CSV), "mixed_reviews": sets.mixed_reviews(),
             "reviews_validation": sets.validation_reviews()[0]}
    for name, examples in named.items():
        logits, labels = labelled(examples)
        probs = (logits / temperature).softmax(-1)
        confidence, predicted = probs.max(-1)
        wrong = predicted != labels
        out[name] = {"n": len(examples), "accuracy": round((~wrong).float().mean().item(), 4),
                     "misses": int(wrong.sum()),
                     "max_miss_confidence": round(confidence[wrong].max().item(), 4) if wrong.any() else None,
                     "ece_before": round(classifier_ece(logits, labels), 4),
                     "ece_after": round(classifier_ece(logits, labels, temperature), 4)}
        if uncertain_below is not None:
            out[name]["uncertain"] = round((confidence < uncertain_below).float().mean().item(), 4)
            out[name]["misses_outside_band"] = int((wrong & (confidence >= uncertain_below)).sum())
    for name, texts in (("neutral", sets.neutral_sentences()), ("validation_neutral", sets.validation_reviews()[1])):
        top = (logits_of(model, tokenizer, texts) / temperature).softmax(-1).max(-1).values.tolist()
        out[name] = {"n": len(texts), "median_top_probability": round(statistics.median(top), 4),
                     "share_above_0.9": round(sum(t > 0.9 for t in top) / len(top), 4)}
        if uncertain_below is not None:
            out[name]["uncertain"] = round(sum(t < uncertain_below for t in top) / len(top), 4)
    return out


def stored_model(path: Path):
    """The base model with the stored differences of `path` merged in, and its tokenizer."""
    from safetensors.torch import load_file
    from transformers import AutoTokenizer, BertForSequenceClassification

    from rollout_core.build import deltas, text_model

    base = text_model.base_model_dir()
    weights = text_model.base_state_dict(base)
    weights.update(deltas.merge(weights, load_file(path)))
    model = BertForSequenceClassification(text_model.classifier_config(base))
    model.load_state_dict(weights, strict=False)
    return model.eval(), AutoTokenizer.from_pretrained(base)


def main() -> None:
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    from rollout_core.build import text_model
    from rollout_core.reliability.text import model_limits

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", nargs="?", type=Path, default=None, help="model folder (default: built default-text)")
    parser.add_argument("--stored", type=Path, help="a trained.safetensors of `training.train_text --dry-run --save`"
                        " to merge into the base model instead of a folder")
    parser.add_argument("--validation-misses", action="store_true",
                        help="also list the validation set's misses (never the blind sets')")
    args = parser.parse_args()
    if args.stored:
        model, tokenizer = stored_model(args.stored)
    else:
        folder = args.folder or text_model.output_dir()
        model = AutoModelForSequenceClassification.from_pretrained(folder).eval()
        tokenizer = AutoTokenizer.from_pretrained(folder)
    if args.validation_misses:
        reviews, neutral = sets.validation_reviews()
        probs = logits_of(model, tokenizer, [e.text for e in reviews]).softmax(-1)
        for e, p in zip(reviews, probs):
            predicted = model.config.id2label[int(p.argmax())]
            if predicted != e.label:
                print(f"MISS {e.label} p={p.max():.2f} {e.text}")
    band = model_limits(model.config)["uncertain_below"]
    print(json.dumps(measure(model, tokenizer, config_temperature(model.config) or 1.0, band), indent=1))


if __name__ == "__main__":
    main()
