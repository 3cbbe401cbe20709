"""Rollout overhead: all-layer rollout time / forward-pass time, BERT-base-sized random-weight model.

The forward runs with eager attention and output_attentions=True (what the plain path needs); the
rollout timed is (a) the [CLS] row after every layer (rollout_rows) and (b) the full matrix after every
layer (attention_rollout(all_layers=True)). Medians of several runs, measured side by side.

    python benchmarks/bench_rollout_overhead.py [--quick]
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import torch
from transformers import BertConfig, BertModel

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from rollout_core.maths.rollout import attention_rollout, rollout_rows  # noqa: E402


def median_seconds(fn, repeats: int) -> float:
    fn()  # warm-up
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="3 repeats instead of 7")
    parser.add_argument("--threads", type=int, default=1,
                        help="torch threads for both the forward and the rollout (default 1: on a shared, loaded "
                             "machine more threads make small ops stall on thread barriers)")
    args = parser.parse_args()
    repeats = 3 if args.quick else 7
    torch.manual_seed(0)
    torch.set_num_threads(args.threads)
    print(f"BERT-base shape, random weights, eager attention, batch 1, fp32, {args.threads} torch thread(s), "
          f"median of {repeats} runs; rollout times include head fusion and the residual step")
    config = BertConfig(hidden_size=768, num_hidden_layers=12, num_attention_heads=12, intermediate_size=3072,
                        max_position_embeddings=512, attn_implementation="eager")
    model = BertModel(config).eval()
    print("| tokens | forward (s) | CLS row, all layers (s) | ratio | full matrix, all layers (s) | ratio |")
    print("|---|---|---|---|---|---|")
    for n in (128, 512):
        ids = torch.randint(1000, 20000, (1, n))
        with torch.inference_mode():
            forward = median_seconds(lambda ids=ids: model(input_ids=ids, output_attentions=True), repeats)
            attentions = model(input_ids=ids, output_attentions=True).attentions
            row = median_seconds(lambda a=attentions: rollout_rows(a, [0], all_layers=True), repeats)
            full = median_seconds(lambda a=attentions: attention_rollout(a, all_layers=True), repeats)
        print(f"| {n} | {forward:.3f} | {row:.4f} | {row / forward:.1%} | {full:.4f} | {full / forward:.1%} |")


if __name__ == "__main__":
    main()
