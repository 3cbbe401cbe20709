"""The compute floor of the corpus engine: forward FLOPs per sentence against this machine's matrix-product rate.

A BERT-like encoder spends 2 * (4 d^2 + 2 d d_ff) FLOPs per token and layer in its linear layers, plus
4 n^2 d per layer in the attention products; the rate is measured on the forward's own product shapes with one
torch thread, per CPU-second (steady when other jobs share the cores), and counted once per core.

    python benchmarks/compute_floor.py [--model default-text] [--sentences 500] [--cores 2] [--loop 43.3]
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks.bench_corpus import corpus  # noqa: E402
from rollout_core.models.loading import load_model  # noqa: E402


def gemm_rate(rows: int, inner: int, cols: int, seconds: float = 2.0) -> float:
    """GFLOP per CPU-second of a (rows x inner) @ (inner x cols) float32 product on one thread."""
    a, b = torch.randn(rows, inner), torch.randn(inner, cols)
    a @ b
    done, start = 0, time.process_time()
    while time.process_time() - start < seconds:
        a @ b
        done += 1
    return 2 * rows * inner * cols * done / (time.process_time() - start) / 1e9


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--model", default="default-text")
    parser.add_argument("--sentences", type=int, default=500)
    parser.add_argument("--cores", type=int, default=2)
    parser.add_argument("--loop", type=float, default=43.3, help="the one-by-one loop's rows/s to compare with")
    args = parser.parse_args()
    config = load_model(args.model).config
    d, ff, layers = config.hidden_size, config.intermediate_size, config.num_hidden_layers
    tokenizer = load_model(args.model).processor
    lengths = [len(ids) for ids in tokenizer(list(corpus(args.sentences)["text"]))["input_ids"]]
    mean_n = sum(lengths) / len(lengths)
    linear = 2 * (4 * d * d + 2 * d * ff) * layers * mean_n
    attention = 4 * d * layers * sum(n * n for n in lengths) / len(lengths)
    flops = linear + attention + 2 * d * d  # + the pooler
    torch.set_num_threads(1)
    rows = 64 * round(mean_n)
    shares = {(rows, d, d): 4 * d * d, (rows, d, ff): d * ff, (rows, ff, d): d * ff}  # FLOP weight of each shape
    rates = {shape: gemm_rate(*shape) for shape in shares}
    rate = sum(shares.values()) / sum(w / rates[s] for s, w in shares.items())  # FLOP-weighted harmonic mean
    floor = args.cores * rate * 1e9 / flops
    print(f"{args.model}: d={d}, d_ff={ff}, {layers} layers; {args.sentences} generated sentences, "
          f"mean {mean_n:.1f} tokens")
    print(f"forward: {flops / 1e6:.0f} MFLOP per sentence ({attention / flops:.1%} in the attention products)")
    for (m, k, n), r in rates.items():
        print(f"  ({m} x {k}) @ ({k} x {n}): {r:.1f} GFLOP per CPU-second")
    print(f"rate {rate:.1f} GFLOP/s per core -> floor {floor:.0f} sentences/s on {args.cores} cores without padding "
          f"or any other work = {floor / args.loop:.1f}x a {args.loop} rows/s loop")


if __name__ == "__main__":
    main()
