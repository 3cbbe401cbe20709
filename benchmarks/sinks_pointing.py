"""Pointing game of plain rollout vs sink-free rollout vs rollout from layer 1, on default-image
(generated shapes, ground-truth masks) and default-text (generated test sentences, evidence spans).
Also prints the received attention (x uniform) and value norms of the top tokens per layer.

    python benchmarks/sinks_pointing.py [--images 30] [--texts 100] [--probe]
"""
from __future__ import annotations

import argparse

import numpy as np
import torch

from rollout_core.explain import explain_image, explain_text
from rollout_core.faithfulness import ground_truth
from rollout_core.maths.rollout import attention_rollout
from rollout_core.maths.sinks import find_sinks, sink_free_rollout
from rollout_core.models.loading import load_model
from rollout_core.models.value_norms import record_value_norms


def _explain(handle, fn, item):
    with record_value_norms(handle.model) as recorded:
        explanation = fn(handle, item, method="rollout", keep_heads=True)
    attentions = torch.as_tensor(explanation.head_attention).unsqueeze(1)  # (L, 1, H, n, n)
    return explanation, attentions, recorded.norms


def _explained_row(explanation) -> torch.Tensor:
    """The explained row as weights: text [CLS]; the DINOv2 classifier pools [CLS] and the patch mean, half each."""
    n = len(explanation.tokens)
    weights = torch.zeros(n, dtype=torch.float64)
    if explanation.kind == "image":
        weights[torch.as_tensor(explanation.patch_positions)] = 0.5 / len(explanation.patch_positions)
        weights[0] += 0.5
    else:
        weights[0] = 1.0
    return weights


def _scores(explanation, attentions, norms, ratio):
    attn_only = find_sinks(attentions, ratio=ratio)
    with_values = find_sinks(attentions, norms, ratio=ratio)
    cls_kept = find_sinks(attentions, ratio=ratio, exclude=[0])
    row = _explained_row(explanation)
    maps = {"plain": attention_rollout(attentions),
            "sink-free attn": sink_free_rollout(attentions, attn_only),
            "sink-free attn+value": sink_free_rollout(attentions, with_values),
            "sink-free attn, [CLS] kept": sink_free_rollout(attentions, cls_kept),
            "from layer 1": attention_rollout(attentions, start_layer=1)}
    return {key: row @ m[0].double() for key, m in maps.items()}


def _unit(v):
    return v / v.sum()


def _probe(name, explanation, attentions, norms, layers=(0, 1, 2, 5)):
    report = find_sinks(attentions, norms)
    print(f"--- {name}")
    for l in layers:
        if l >= attentions.shape[0]:
            continue
        over = report.received[l, 0]
        top = over.argsort(descending=True)[:4].tolist()
        med = float(norms[l, 0].median()) if norms is not None else float("nan")
        values = norms[l, 0].tolist() if norms is not None else [float("nan")] * len(explanation.tokens)
        cells = ", ".join(f"{explanation.tokens[j]!r} {float(over[j]):.1f}x v={values[j]:.2f}" for j in top)
        print(f"layer {l + 1}: median v={med:.2f}; top received: {cells}; sinks={report.sinks[l, 0].sum().item()} "
              f"share={float(report.share[l, 0]):.2f}")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--images", type=int, default=30)
    parser.add_argument("--texts", type=int, default=100)
    parser.add_argument("--probe", action="store_true")
    parser.add_argument("--ratio", type=float, default=5.0)
    args = parser.parse_args()
    torch.set_num_threads(1)
    from rollout_core.data import sentiment, shapes

    image_model = load_model("default-image")
    if args.probe:
        from skimage import data as skdata
        probes = [("shapes 0", shapes.generate(1)[0].image), ("chelsea", skdata.chelsea()),
                  ("astronaut", skdata.astronaut())]
        for name, image in probes:
            _probe(name, *_explain(image_model, explain_image, image))
    hits: dict[str, list[float]] = {}
    for item in shapes.generate(args.images):
        explanation, attentions, norms = _explain(image_model, explain_image, item.image)
        region = ground_truth.patch_region(item.mask, explanation.image.shape[:2], explanation.grid,
                                           explanation.patch_positions, len(explanation.tokens))
        scores = _scores(explanation, attentions, norms, args.ratio)
        shown = ~explanation.special  # same map as the Explanation's on the shown patches
        assert np.allclose(_unit(scores["plain"].numpy()[shown]), _unit(explanation.scores[shown]), atol=1e-3)
        for key, s in scores.items():
            hit = ground_truth.pointing_game(s.numpy(), region, ~explanation.special)
            hits.setdefault("image " + key, []).append(hit)
    text_model = load_model("default-text")
    sentences = sentiment.generate(args.texts)
    if args.probe:
        for example in sentences[:3]:
            _probe(example.text, *_explain(text_model, explain_text, example.text))
    for example in sentences:
        explanation, attentions, norms = _explain(text_model, explain_text, example.text)
        region = ground_truth.text_region(explanation.offsets, explanation.special, example.evidence)
        scores = _scores(explanation, attentions, norms, args.ratio)
        for key, s in scores.items():
            hit = ground_truth.pointing_game(s.numpy(), region, ~explanation.special)
            hits.setdefault("text " + key, []).append(hit)
    for key, values in hits.items():
        print(f"{key:28s} pointing game {np.nanmean(values):.3f} (n={np.sum(~np.isnan(values))})")


if __name__ == "__main__":
    main()
