"""Weight-averaged "model soups" of default-text's fine-tunes: `python -m training.soup RUN [RUN ...] --save DIR`.

Every fine-tune of the default text model starts from the same pretrained all-MiniLM-L6-v2 (most continue from the
committed one), so the average of their weights is one model of the same size and speed (Wortsman et al., "Model
soups", ICML 2022). A RUN is a folder holding a stored delta and its record (trained.safetensors + training.json,
as `training.train_text --dry-run --save` writes them, or rollout_core/assets/text-sentiment). The uniform soup
averages all RUNs; `--greedy` orders them by validation accuracy and adds one only if the soup's validation
accuracy rises (ties keep fewer models). The soup is stored as train_text stores a run (int8 differences from the
package weights) and measured through that stored form the same way: temperature and uncertain band fitted on the
validation set, blind sets only measured.
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Callable

import torch

from rollout_core.build import deltas
from rollout_core.build.text_model import SETTINGS_FILE, TRAINED_FILE, base_model_dir, base_state_dict

TEST = {"seed": 0, "test_sentences": 2000}
"""The generated test draw the soup is measured on: the committed model's (seed 0, 2000 sentences)."""


def check_alike(states: list[dict[str, torch.Tensor]]) -> None:
    """Raise ValueError unless there is at least one state dict and all have the same keys and shapes."""
    if not states:
        raise ValueError("nothing to average")
    keys = set(states[0])
    for state in states[1:]:
        if set(state) != keys:
            raise ValueError(f"parameters differ: {sorted(keys ^ set(state))[:5]}")
        for key in keys:
            if state[key].shape != states[0][key].shape:
                raise ValueError(f"{key}: shape {tuple(state[key].shape)} != {tuple(states[0][key].shape)}")


def average(states: list[dict[str, torch.Tensor]]) -> dict[str, torch.Tensor]:
    """The uniform average of state dicts with the same keys and shapes, in float32."""
    check_alike(states)
    return {key: torch.stack([state[key].float() for state in states]).mean(0) for key in states[0]}


def greedy(ingredients: list[str], score: Callable[[list[str]], float]) -> tuple[list[str], float]:
    """Greedy soup: `ingredients` best first; each is kept only if `score` of the soup with it is strictly higher."""
    soup, best = ingredients[:1], score(ingredients[:1])
    for candidate in ingredients[1:]:
        trial = score(soup + [candidate])
        if trial > best:
            soup, best = soup + [candidate], trial
    return soup, best


def trained_weights(run: Path, base: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """The fine-tuned parameters of a saved run, merged from its stored differences."""
    from safetensors.torch import load_file

    return deltas.merge(base, load_file(run / TRAINED_FILE.name))


class Kitchen:
    """The runs' weights, loaded once, and a model to score soups of them."""

    def __init__(self, runs: list[Path]):
        from transformers import AutoTokenizer

        from training.train_text import make_model

        self.base = base_state_dict(base_model_dir())
        self.weights = {str(run): trained_weights(run, self.base) for run in runs}
        check_alike(list(self.weights.values()))
        self.records = {str(run): json.loads((run / SETTINGS_FILE.name).read_text()) for run in runs}
        self.model, _ = make_model({"seed": 0, "trained_layers": [], "start_from": None})
        self.tokenizer = AutoTokenizer.from_pretrained(base_model_dir())

    def stored(self, runs: list[str]) -> dict[str, torch.Tensor]:
        """The soup of `runs` in the committed form (int8 differences from the package weights)."""
        return deltas.quantise(average([self.weights[run] for run in runs]), self.base)

    def validation(self, runs: list[str]) -> dict:
        """Validation accuracy and NLL of the stored soup, as train_text picks an epoch."""
        from training.train_text import validation_score

        self.model.load_state_dict(deltas.merge(self.base, self.stored(runs)), strict=False)
        return validation_score(self.model.eval(), self.tokenizer)

    def record(self, runs: list[str], how: str) -> tuple[dict[str, torch.Tensor], dict]:
        """The stored soup and its training.json record, with train_text's full measurement."""
        import transformers

        from training.train_text import stored_metrics

        stored = self.stored(runs)
        longest = min(self.records[run]["metrics"]["reliability"]["trained_max_tokens"] for run in runs)
        metrics = stored_metrics(self.model, self.tokenizer, stored, TEST, longest)
        ingredients = {run: self.records[run]["settings"] for run in runs}
        layers = sorted({layer for settings in ingredients.values() for layer in settings["trained_layers"]})
        settings = {"soup": how, "trained_layers": layers, "ingredients": ingredients, **TEST}
        return stored, {"settings": settings, "metrics": {k: v for k, v in metrics.items() if k != "check"},
                        "check": metrics["check"],
                        "versions": {"torch": torch.__version__, "transformers": transformers.__version__}}


def main() -> None:
    from safetensors.torch import save_file

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", nargs="+", type=Path, help="folders with trained.safetensors + training.json")
    parser.add_argument("--greedy", action="store_true", help="greedy soup by validation accuracy (default: uniform)")
    parser.add_argument("--save", type=Path, help="write trained.safetensors and training.json of the soup here")
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    for run in args.runs:
        if not (run / TRAINED_FILE.name).is_file() or not (run / SETTINGS_FILE.name).is_file():
            parser.error(f"{run}: no {TRAINED_FILE.name} and {SETTINGS_FILE.name} there")
    torch.set_num_threads(args.threads)
    try:
        kitchen = Kitchen(args.runs)
    except (KeyError, ValueError) as err:
        parser.error(f"these runs cannot be averaged: {err}")
    runs = [str(run) for run in args.runs]
    alone = {run: kitchen.validation([run]) for run in runs}
    for run, score in alone.items():
        print(f"alone {score} {run}", flush=True)
    if args.greedy:
        def score(soup: list[str]) -> float:
            result = kitchen.validation(soup)
            print(f"soup of {len(soup)}: {result} (+ {soup[-1]})", flush=True)
            return result["accuracy"]

        ordered = sorted(runs, key=lambda run: (-alone[run]["accuracy"], alone[run]["nll"]))
        chosen, _ = greedy(ordered, score)
    else:
        chosen = runs
    stored, record = kitchen.record(chosen, "greedy" if args.greedy else "uniform")
    hand = record["metrics"]["hand_written"]
    print(f"soup of {chosen}: validation {hand['reviews_validation']['accuracy']}, blind "
          f"{hand['reviews_blind']['accuracy']} (max miss {hand['reviews_blind']['max_miss_confidence']}), "
          f"generated test {record['metrics']['test_accuracy']:.4f}, temperature "
          f"{record['metrics']['calibration']['temperature']:.3f}", flush=True)
    print(json.dumps(record["metrics"]))
    if args.save:
        args.save.mkdir(parents=True, exist_ok=True)
        save_file(stored, args.save / TRAINED_FILE.name, metadata={"format": "pt"})
        (args.save / SETTINGS_FILE.name).write_text(json.dumps(record, indent=2) + "\n")
        print(f"wrote {args.save}")


if __name__ == "__main__":
    main()
