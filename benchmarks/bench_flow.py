"""Attention flow: ours (maths.maxflow's compiled Dinic, one graph per explained row) vs the rollout paper's approach
(networkx edmonds_karp, one call per (output, input) pair), on the same graphs, in one run.

    python benchmarks/bench_flow.py [--quick]
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import networkx as nx
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from rollout_core.maths.flow import attention_flow  # noqa: E402
from rollout_core.maths.flow_bounded import bounded_attention_flow  # noqa: E402
from rollout_core.maths.fusion import fuse_heads  # noqa: E402
from rollout_core.maths.rollout import augment_layer  # noqa: E402


def random_attentions(layers: int, heads: int, n: int, seed: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.softmax(torch.randn(layers, 1, heads, n, n, generator=g, dtype=torch.float64) * 3, dim=-1)


def networkx_reference(attn: torch.Tensor, pairs: list[tuple[int, int]]) -> dict[tuple[int, int], float]:
    """The paper's code path: a DiGraph of the layered graph, edmonds_karp per (output, input) pair."""
    layers = [augment_layer(fuse_heads(a)).numpy()[0] for a in attn]
    n, top = layers[0].shape[0], len(layers)
    graph = nx.DiGraph()
    for depth, aug in enumerate(layers):
        for i in range(n):
            for j in range(n):
                graph.add_edge((depth, j), (depth + 1, i), capacity=aug[i, j])
    return {(i, j): nx.maximum_flow_value(graph, (0, j), (top, i), flow_func=nx.algorithms.flow.edmonds_karp)
            for i, j in pairs}


def compare(layers: int, n: int, reference_rows: int) -> dict[str, object]:
    """Ours on all n x n pairs; the reference on `reference_rows` whole output rows (time extrapolated)."""
    attn = random_attentions(layers, 4, n, seed=layers * 100 + n)
    start = time.perf_counter()
    ours = attention_flow(attn)[0].numpy()
    ours_time = time.perf_counter() - start
    rows = list(range(min(reference_rows, n)))
    start = time.perf_counter()
    ref = networkx_reference(attn, [(i, j) for i in rows for j in range(n)])
    ref_time = (time.perf_counter() - start) * n / len(rows)
    diff = max(abs(ours[i, j] - ref[(i, j)] / sum(ref[(i, k)] for k in range(n))) for i in rows for j in range(n))
    return {"graph": f"{layers} layers x {n} tokens", "pairs": n * n, "reference_pairs_run": len(rows) * n,
            "ours_s": ours_time, "networkx_s": ref_time, "speedup": ref_time / ours_time, "max_abs_diff": diff}


def vit_cls_row(layers: int = 12, n: int = 197, heads: int = 6) -> dict[str, object]:
    attn = random_attentions(layers, heads, n, seed=7).float()
    start = time.perf_counter()
    exact = attention_flow(attn, output_tokens=[0])
    exact_s = time.perf_counter() - start
    start = time.perf_counter()
    approx = bounded_attention_flow(attn, output_tokens=[0])
    approx_s = time.perf_counter() - start
    return {"exact_s": exact_s, "approx_s": approx_s, "approx_max_abs_err": float((exact - approx.values).abs().max()),
            "bound": approx.error_bound}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="2 instead of 6 reference rows on the large graph")
    args = parser.parse_args()
    torch.set_num_threads(1)
    rows = [compare(6, 16, 16), compare(12, 32, 2 if args.quick else 6)]
    print("| graph | pairs | networkx pairs run | ours (s) | networkx (s, all pairs) | speedup | max abs diff |")
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        note = "" if r["reference_pairs_run"] == r["pairs"] else " (extrapolated)"
        print(f"| {r['graph']} | {r['pairs']} | {r['reference_pairs_run']} | {r['ours_s']:.3f} | "
              f"{r['networkx_s']:.2f}{note} | {r['speedup']:.0f}x | {r['max_abs_diff']:.2e} |")
    vit = vit_cls_row()
    print()
    print("| ViT-like CLS row (12 layers, 197 tokens, 6 heads) | exact (s) | mass-pruned (s) | max abs err "
          "| reported bound |")
    print("|---|---|---|---|---|")
    print(f"| output_tokens=[0] | {vit['exact_s']:.1f} | {vit['approx_s']:.1f} | {vit['approx_max_abs_err']:.1e} "
          f"| {vit['bound']:.1e} |")


if __name__ == "__main__":
    main()
