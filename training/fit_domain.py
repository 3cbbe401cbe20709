"""Fit the out-of-domain statistics of a shapes model and measure their error rates:
`python -m training.fit_domain --model default-image`.

Features: the input of the model's classifier on generated shapes (`rollout_core.models.domain`). Fitted on the
"train" split (`--train` images, their true labels as classes); the threshold is the 99.5th percentile of the
"test" split's distances (`--held-out` images); the false-alarm rate is then measured on images neither saw (the
"domain-check" split, `--check` images), and the detection rate on photos: every colour or grey photo that ships in
scikit-image and scikit-learn (the bundled examples among them), each whole, mirrored and as five crops of 60%
of its sides, plus 40 LFW faces (scikit-image's 25x25 greyscale subset), i.e. images no shapes model should be
trusted on. Each reason's rate is reported alone and combined: the distance above the threshold, a nearly grey
image (`domain.GREY_BELOW`), and the model's top probability below the 2% quantile of the held-out shapes'
(`domain.UNSURE_QUANTILE`; its own note), also among the photos the model is confident on.

Output: `rollout_core/models/measured/<model>.domain.safetensors` (the statistics, about 0.1 MB) and
`docs/reliability/<model>.json` (the rates, per-photo distances, the command); docs/reliability.md quotes them.
"""
from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path
from typing import Iterable

import numpy as np
import torch
from PIL import Image

from rollout_core.data import shapes
from rollout_core.inputs.images import model_pixels
from rollout_core.models import domain
from rollout_core.models.loading import load_model

ROOT = Path(__file__).resolve().parents[1]
MODULE = "classifier"
BATCH = 16


def photos() -> dict[str, Image.Image]:
    """Every photo scikit-image and scikit-learn ship (RGB), by name."""
    import skimage
    from sklearn.datasets import load_sample_images

    folder = Path(skimage.__file__).parent / "data"
    found = {}
    for path in sorted(folder.glob("*")):
        if path.suffix in (".png", ".jpg") and not path.name.startswith("lbp"):
            found[path.stem] = Image.open(path).convert("RGB")
    for name, array in zip(("china", "flower"), load_sample_images().images):
        found[name] = Image.fromarray(array)
    faces = np.load(folder / "lfw_subset.npy")[:40]
    found.update({f"lfw-{i}": Image.fromarray((face * 255).astype(np.uint8)).convert("RGB")
                  for i, face in enumerate(faces)})
    return found


def views(name: str, image: Image.Image) -> Iterable[tuple[str, Image.Image]]:
    """The photo, mirrored, and five crops of 60% of each side (corners and centre); faces only whole."""
    yield name, image
    if name.startswith("lfw-"):
        return
    yield f"{name} mirrored", image.transpose(Image.Transpose.FLIP_LEFT_RIGHT)
    w, h = image.size
    for x, y in ((0, 0), (0.4, 0), (0, 0.4), (0.4, 0.4), (0.2, 0.2)):
        box = (int(x * w), int(y * h), int((x + 0.6) * w), int((y + 0.6) * h))
        yield f"{name} crop {x:.1f},{y:.1f}", image.crop(box)


def features(handle, images: list[Image.Image]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(classifier inputs (N, d), colourfulness of each image as the model saw it (N,), top probability (N,))."""
    from rollout_core.pipeline.assemble import processed_image

    rows, colour, top = [], [], []
    for start in range(0, len(images), BATCH):
        pixels = torch.cat([model_pixels(handle.processor, im) for im in images[start:start + BATCH]])
        with domain.record_features(handle.model, MODULE) as found, torch.no_grad():
            logits = handle.model(pixel_values=pixels.to(handle.device)).logits
        rows.append(found[0].numpy())
        top += torch.softmax(logits.float(), -1).max(-1).values.tolist()
        colour += [domain.colourfulness(processed_image(p, handle.processor)) for p in pixels]
    return np.concatenate(rows).astype(np.float64), np.array(colour), np.array(top)


def rates(distance: np.ndarray, colour: np.ndarray, top: np.ndarray, threshold: float, unsure_below: float
          ) -> dict[str, float]:
    """How often each reason fires, and any of them (`reliability.image.image_notes`' rule)."""
    far, grey, unsure = distance > threshold, colour < domain.GREY_BELOW, top < unsure_below
    return {"distance": float(far.mean()), "grey": float(grey.mean()), "unsure": float(unsure.mean()),
            "distance_or_grey": float((far | grey).mean()), "any": float((far | grey | unsure).mean())}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="default-image")
    parser.add_argument("--train", type=int, default=1000)
    parser.add_argument("--held-out", type=int, default=500)
    parser.add_argument("--check", type=int, default=500)
    parser.add_argument("--rank", type=int, default=64)
    parser.add_argument("--shrink", type=float, default=0.1)
    parser.add_argument("--quantile", type=float, default=0.995)
    args = parser.parse_args()
    torch.manual_seed(0)
    started = time.monotonic()
    handle = load_model(args.model)

    def shapes_split(n: int, split: str) -> tuple[list[Image.Image], np.ndarray]:
        examples = shapes.generate(n, seed=0, split=split)
        return ([Image.fromarray(e.image) for e in examples],
                np.array([shapes.LABELS.index(e.label) for e in examples]))

    train, labels = shapes_split(args.train, "train")
    held_out, _ = shapes_split(args.held_out, "test")
    check, _ = shapes_split(args.check, "domain-check")
    named = [view for name, image in photos().items() for view in views(name, image)]
    train_f, _, _ = features(handle, train)
    held = features(handle, held_out)
    unseen = features(handle, check)
    photo = features(handle, [image for _, image in named])
    stats = domain.fit(train_f, labels, held[0], held[2], module=MODULE,
                       fingerprint=domain.weights_fingerprint(handle.model, MODULE), dataset="generated shapes",
                       rank=args.rank, shrink=args.shrink, quantile=args.quantile)
    domain.save(stats, domain.DOMAIN_DIR / f"{args.model}{domain.SUFFIX}")
    photo_d = stats.distance(photo[0])
    confident = photo[2] >= stats.unsure_below
    record = {
        "model": args.model, "command": "python -m training.fit_domain " + " ".join(
            f"--{k.replace('_', '-')} {v}" for k, v in vars(args).items()),
        "features": f"input of `{MODULE}` ({train_f.shape[1]} values)", "rank": args.rank, "shrink": args.shrink,
        "threshold": stats.threshold, "typical": stats.typical, "quantile": args.quantile,
        "grey_below": domain.GREY_BELOW, "unsure_below": stats.unsure_below,
        "shapes_flagged": {f"{args.held_out} held-out shapes (set the threshold)":
                           rates(stats.distance(held[0]), held[1], held[2], stats.threshold, stats.unsure_below),
                           f"{args.check} unseen shapes": rates(stats.distance(unseen[0]), unseen[1], unseen[2],
                                                                stats.threshold, stats.unsure_below)},
        "photos_flagged": rates(photo_d, photo[1], photo[2], stats.threshold, stats.unsure_below),
        "photo_views": len(named),
        "photos_confident": float(confident.mean()),
        "confident_photos_flagged": rates(photo_d[confident], photo[1][confident], photo[2][confident],
                                          stats.threshold, stats.unsure_below),
        "per_photo": {name: {"distance": round(float(d), 2), "colourfulness": round(float(c), 3),
                             "top_probability": round(float(p), 3)}
                      for (name, _), d, c, p in zip(named, photo_d, photo[1], photo[2])},
        "seconds": round(time.monotonic() - started, 1), "load": os.getloadavg()[0],
    }
    out = ROOT / "docs" / "reliability" / f"{args.model}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
    print(json.dumps({k: v for k, v in record.items() if k != "per_photo"}, indent=2))


if __name__ == "__main__":
    main()
