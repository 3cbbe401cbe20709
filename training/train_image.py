"""Train the embedded "shapes-vit-tiny" model: a small ViT classifier trained from scratch on the generated shapes.

`python -m training.train_image` trains from the seeded `TrainConfig` below (fresh generated
images every step, so there is no fixed training set to overfit), measures accuracy on the held-out
"test" split, and writes an ordinary transformers folder to `rollout_core/assets/models/shapes-vit-tiny/`:
config.json (id2label, eager attention), model.safetensors, preprocessor_config.json (a ViTImageProcessor,
whose slow PIL/numpy form needs no torchvision) and metrics.json. The same config and seed give the same
weights on the same machine and thread count.

A ViT trained from scratch on this task sits at chance for hundreds of steps before it finds the shapes.
An auxiliary loss shortens that: a linear probe on the patch tokens of a middle layer predicts, for each
patch, the shape's label (patch mostly inside the mask) or "background" (patch outside it). It only
shapes the features during training; the probe is discarded and the saved model is a plain
ViTForImageClassification whose prediction comes from its CLS token as usual. Position embeddings start
from 2-D sine-cosine tables (and are trained), as in MAE.
"""
from __future__ import annotations

import argparse
import json
import math
import platform
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import torch

from rollout_core.data import shapes
from rollout_core.paths import ASSETS_DIR

OUTPUT_DIR = ASSETS_DIR / "models" / "shapes-vit-tiny"
IMAGE_MEAN = IMAGE_STD = (0.5, 0.5, 0.5)


@dataclass(frozen=True)
class TrainConfig:
    """Model shape and optimisation settings; every field is recorded in metrics.json."""

    image_size: int = 64
    patch_size: int = 8
    hidden_size: int = 96
    num_layers: int = 4
    num_heads: int = 4
    mlp_ratio: int = 4
    steps: int = 3000
    batch_size: int = 64
    learning_rate: float = 1e-3
    weight_decay: float = 0.05
    warmup_steps: int = 150
    aux_weight: float = 1.0
    aux_layer: int = 3
    seed: int = 0
    test_size: int = 1000
    threads: int = 1


def pixel_values(images: np.ndarray) -> torch.Tensor:
    """uint8 (B, H, W, 3) -> normalised float (B, 3, H, W), exactly what the saved ViTImageProcessor does
    for images already at the model's size (rescale 1/255, then (x - 0.5) / 0.5)."""
    x = torch.from_numpy(np.ascontiguousarray(images)).permute(0, 3, 1, 2).float() / 255.0
    mean = torch.tensor(IMAGE_MEAN).view(1, 3, 1, 1)
    std = torch.tensor(IMAGE_STD).view(1, 3, 1, 1)
    return (x - mean) / std


def _batch(examples: list[shapes.ImageExample]) -> tuple[torch.Tensor, torch.Tensor]:
    images = np.stack([e.image for e in examples])
    labels = torch.tensor([shapes.LABELS.index(e.label) for e in examples])
    return pixel_values(images), labels


def patch_targets(examples: list[shapes.ImageExample], labels: torch.Tensor, patch_size: int) -> torch.Tensor:
    """(B, patches) targets for the auxiliary probe, row-major like the ViT's patch tokens: the image's label
    where >= 30% of the patch is shape, `len(LABELS)` (background) where none is, -100 (ignored) between."""
    masks = torch.from_numpy(np.stack([e.mask for e in examples])).float()
    b, h, w = masks.shape
    inside = masks.view(b, h // patch_size, patch_size, w // patch_size, patch_size).mean((2, 4)).flatten(1)
    targets = torch.full(inside.shape, -100, dtype=torch.long)
    targets[inside == 0] = len(shapes.LABELS)
    shape = inside >= 0.3
    targets[shape] = labels[:, None].expand_as(targets)[shape]
    return targets


def sincos_positions(grid: int, dim: int) -> torch.Tensor:
    """(1 + grid * grid, dim) fixed 2-D sine-cosine position embeddings (as in MAE), zero for CLS: patches
    that are close start with similar embeddings, so attention can find neighbours from the first step."""
    quarter = dim // 4
    frequencies = 1.0 / (10000 ** (torch.arange(quarter, dtype=torch.float32) / quarter))
    rows, cols = torch.meshgrid(torch.arange(grid, dtype=torch.float32), torch.arange(grid, dtype=torch.float32),
                                indexing="ij")
    parts = []
    for coordinate in (rows.flatten(), cols.flatten()):
        angles = coordinate[:, None] * frequencies[None, :]
        parts += [angles.sin(), angles.cos()]
    table = torch.zeros(1 + grid * grid, dim)
    table[1:, : 4 * quarter] = torch.cat(parts, dim=1)
    return table


def build_model(config: TrainConfig):
    """A ViTForImageClassification with the shapes labels: random weights, sine-cosine position embeddings
    (still trained)."""
    from transformers import ViTConfig, ViTForImageClassification

    vit_config = ViTConfig(
        image_size=config.image_size,
        patch_size=config.patch_size,
        hidden_size=config.hidden_size,
        num_hidden_layers=config.num_layers,
        num_attention_heads=config.num_heads,
        intermediate_size=config.mlp_ratio * config.hidden_size,
        num_labels=len(shapes.LABELS),
        id2label=dict(enumerate(shapes.LABELS)),
        label2id={label: i for i, label in enumerate(shapes.LABELS)},
        hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0,
    )
    model = ViTForImageClassification(vit_config)
    with torch.no_grad():
        grid = config.image_size // config.patch_size
        model.vit.embeddings.position_embeddings.copy_(sincos_positions(grid, config.hidden_size)[None])
    return model


@torch.no_grad()
def accuracy(model: torch.nn.Module, examples: list[shapes.ImageExample], batch_size: int = 200) -> dict:
    """Overall and per-label accuracy of `model` on `examples`."""
    model.eval()
    predictions, truth = [], []
    for start in range(0, len(examples), batch_size):
        x, y = _batch(examples[start : start + batch_size])
        predictions.append(model(pixel_values=x).logits.argmax(-1))
        truth.append(y)
    pred, true = torch.cat(predictions), torch.cat(truth)
    per_label = {label: float((pred[true == i] == i).float().mean()) for i, label in enumerate(shapes.LABELS)}
    return {"accuracy": float((pred == true).float().mean()), "per_label": per_label, "n": len(examples)}


def train(config: TrainConfig, log=print) -> tuple[torch.nn.Module, dict]:
    """Train from scratch; return the model (eval mode) and its metrics."""
    torch.set_num_threads(config.threads)
    torch.manual_seed(config.seed)
    model = build_model(config)
    probe = torch.nn.Linear(config.hidden_size, len(shapes.LABELS) + 1)
    named = [*model.named_parameters(), *(("probe." + n, p) for n, p in probe.named_parameters())]
    decay = [p for n, p in named if p.ndim >= 2 and "embeddings" not in n]
    no_decay = [p for n, p in named if not (p.ndim >= 2 and "embeddings" not in n)]
    optimiser = torch.optim.AdamW(
        [{"params": decay, "weight_decay": config.weight_decay}, {"params": no_decay, "weight_decay": 0.0}],
        lr=config.learning_rate,
    )

    def lr_factor(step: int) -> float:
        if step < config.warmup_steps:
            return (step + 1) / config.warmup_steps
        progress = (step - config.warmup_steps) / max(1, config.steps - config.warmup_steps)
        return 0.5 * (1 + math.cos(math.pi * progress))

    scheduler = torch.optim.lr_scheduler.LambdaLR(optimiser, lr_factor)
    test = shapes.generate(config.test_size, seed=config.seed, split="test", size=config.image_size)
    started = time.perf_counter()
    running = 0.0
    model.train()
    for step in range(config.steps):
        examples = shapes.generate(config.batch_size, seed=config.seed * 1_000_003 + step, split="train",
                                   size=config.image_size)
        x, y = _batch(examples)
        out = model(pixel_values=x, output_hidden_states=config.aux_weight > 0)
        loss = torch.nn.functional.cross_entropy(out.logits, y)
        total = loss
        if config.aux_weight > 0:
            patch_logits = probe(out.hidden_states[config.aux_layer][:, 1:])
            targets = patch_targets(examples, y, config.patch_size)
            total = total + config.aux_weight * torch.nn.functional.cross_entropy(
                patch_logits.flatten(0, 1), targets.flatten(), ignore_index=-100)
        optimiser.zero_grad(set_to_none=True)
        total.backward()
        torch.nn.utils.clip_grad_norm_([p for _, p in named], 1.0)
        optimiser.step()
        scheduler.step()
        running = 0.98 * running + 0.02 * loss.item() if step else loss.item()
        if (step + 1) % 100 == 0 or step + 1 == config.steps:
            log(f"step {step + 1}/{config.steps}  loss {running:.3f}  {time.perf_counter() - started:.0f}s")
    seconds = time.perf_counter() - started
    result = accuracy(model, test)
    log(f"test accuracy {result['accuracy']:.4f} on {result['n']} held-out images")
    metrics = {
        "test_accuracy": result["accuracy"],
        "test_per_label": result["per_label"],
        "test_images": result["n"],
        "test_split": {"split": "test", "seed": config.seed, "size": config.image_size},
        "train_images_seen": config.steps * config.batch_size,
        "train_seconds": round(seconds, 1),
        "final_train_loss": round(running, 4),
        "parameters": sum(p.numel() for p in model.parameters()),
        "settings": asdict(config),
        "versions": {"torch": torch.__version__, "python": platform.python_version()},
    }
    return model, metrics


def save(model: torch.nn.Module, metrics: dict, out: Path, config: TrainConfig) -> dict:
    """Write the transformers folder (eager attention in config.json, safetensors weights, processor,
    metrics.json); return the metrics as written."""
    import transformers
    from transformers import ViTImageProcessorPil

    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out, safe_serialization=True)
    # transformers does not serialise the attention backend, but honours this key on load: the folder
    # then gives attention weights without the caller asking for eager attention.
    config_path = out / "config.json"
    config_json = json.loads(config_path.read_text())
    config_path.write_text(json.dumps({**config_json, "attn_implementation": "eager"}, indent=2) + "\n")
    ViTImageProcessorPil(
        do_resize=True,
        size={"height": config.image_size, "width": config.image_size},
        do_rescale=True,
        rescale_factor=1 / 255,
        do_normalize=True,
        image_mean=list(IMAGE_MEAN),
        image_std=list(IMAGE_STD),
    ).save_pretrained(out)
    metrics = {**metrics, "weights_bytes": (out / "model.safetensors").stat().st_size}
    metrics["versions"]["transformers"] = transformers.__version__
    (out / "metrics.json").write_text(json.dumps(metrics, indent=2) + "\n")
    return metrics


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=OUTPUT_DIR, help="output folder (default: %(default)s)")
    parser.add_argument("--steps", type=int, default=TrainConfig.steps)
    parser.add_argument("--seed", type=int, default=TrainConfig.seed)
    parser.add_argument("--threads", type=int, default=TrainConfig.threads)
    parser.add_argument("--layers", type=int, default=TrainConfig.num_layers)
    parser.add_argument("--aux-weight", type=float, default=TrainConfig.aux_weight)
    parser.add_argument("--batch-size", type=int, default=TrainConfig.batch_size)
    args = parser.parse_args(argv)
    config = TrainConfig(steps=args.steps, seed=args.seed, threads=args.threads, num_layers=args.layers,
                         aux_weight=args.aux_weight, batch_size=args.batch_size)
    model, metrics = train(config)
    metrics = save(model, metrics, args.out, config)
    print(f"saved to {args.out}: test accuracy {metrics['test_accuracy']:.4f}, "
          f"{metrics['weights_bytes'] / 1e6:.2f} MB, {metrics['train_seconds']:.0f}s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
