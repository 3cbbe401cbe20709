"""Do the maps sit on the object? dinov2-small on scikit-image's photos, every method, against hand-drawn boxes.

The boxes (patch rows/cols of the 16 x 16 grid of the 224 px crop the model sees, end exclusive) were drawn by
looking at the crops: the cup of `coffee`, the face of `astronaut`, the eyes and nose of `chelsea` (the crop is
all cat face, so the box is its features). For each method: the share of the map's mass inside the box, its
lift (share / box area: 1 = no better than a flat map) and whether the top patch is inside (pointing).
With --save DIR it writes the overlay of the best method on each photo (for the README); with --record, the
measured record of the model (rollout_core/models/measured/<model>.json, ranked by mean lift: the sidebar shows
these figures and the model opens on the best plain method).

    python benchmarks/photo_maps.py [--save docs/screenshots] [--record]
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import rollout_core as rc  # noqa: E402
from rollout_core.errors import RolloutError  # noqa: E402

BOXES = {  # photo -> list of (row0, row1, col0, col1)
    "coffee": [(0, 8, 2, 13)],
    "astronaut": [(0, 6, 4, 10)],
    "chelsea": [(4, 9, 1, 5), (5, 10, 12, 16), (9, 16, 6, 11)],
}
RUNS = [("rollout", {}), ("rollout", {"start_layer": 1}), ("attention", {}), ("norm", {}), ("alti", {}),
        ("sink_free", {}), ("flow", {})]


def box_mask(boxes: list[tuple[int, int, int, int]], grid: tuple[int, int]) -> np.ndarray:
    mask = np.zeros(grid, dtype=bool)
    for r0, r1, c0, c1 in boxes:
        mask[r0:r1, c0:c1] = True
    return mask


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--model", default="dinov2-small")
    parser.add_argument("--save", type=Path, default=None)
    parser.add_argument("--record", action="store_true")
    args = parser.parse_args()
    import skimage.data

    print(f"{args.model}; share = map mass inside the box, lift = share / box area, top = top patch inside")
    print("| method | " + " | ".join(f"{p} share / lift / top" for p in BOXES) + " | mean lift |")
    print("|---|" + "---|" * (len(BOXES) + 1))
    best: tuple[float, str, dict] | None = None
    measured: dict[str, dict[str, float]] = {}
    areas: dict[str, float] = {}
    for method, options in RUNS:
        label = method + "".join(f" {k}={v}" for k, v in options.items())
        cells, lifts, shares, tops = [], [], [], []
        for photo, boxes in BOXES.items():
            try:
                e = rc.explain_image(args.model, getattr(skimage.data, photo)(), method=method, **options)
            except RolloutError as err:
                cells.append(f"n/a ({err})")
                continue
            heat = e.score_map()
            mask = box_mask(boxes, heat.shape)
            share = float(heat[mask].sum())
            lift = share / mask.mean()
            top = bool(mask.flat[int(np.argmax(heat))])
            lifts.append(lift)
            shares.append(share)
            tops.append(top)
            areas[photo] = float(mask.mean())
            cells.append(f"{share:.2f} / {lift:.1f} / {'yes' if top else 'no'}")
        mean = float(np.mean(lifts)) if lifts else float("nan")
        print(f"| {label} | " + " | ".join(cells) + f" | {mean:.2f} |")
        if lifts and not options:  # a plain method (not a variant of its options): into the record
            measured[method] = {"mass_lift": mean, "mass_share": float(np.mean(shares)),
                                "pointing_game": float(np.mean(tops))}
        if lifts and (best is None or mean > best[0]):
            best = (mean, method, options)
    if args.record:
        _record(args.model, measured, float(np.mean(list(areas.values()))))
    if args.save is not None and best is not None:
        from rollout_core import figures

        _, method, options = best
        args.save.mkdir(parents=True, exist_ok=True)
        for photo in BOXES:
            e = rc.explain_image(args.model, getattr(skimage.data, photo)(), method=method, **options)
            path = args.save / f"photo_{photo}_{method}.png"
            path.write_bytes(figures.figure_png(figures.image_overlay(e), width=500, height=520, scale=1.0))
            print(f"wrote {path}")


def _record(model: str, measured: dict[str, dict[str, float]], area: float) -> None:
    """The measured record of `model` from this study (random: a flat map, lift 1 and the boxes' mean area)."""
    import datetime
    import json

    from rollout_core.models.measured import path_for

    record = {"model": model, "dataset": "photos", "examples": len(BOXES), "accuracy": None,
              "command": f"python benchmarks/photo_maps.py --model {model} --record",
              "date": datetime.date.today().isoformat(), "ranked_by": [["mass_lift", "higher"]],
              "methods": measured, "random": {"mass_lift": 1.0, "mass_share": area, "pointing_game": area}}
    path_for(model).write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
    print(f"wrote {path_for(model)}")


if __name__ == "__main__":
    main()
