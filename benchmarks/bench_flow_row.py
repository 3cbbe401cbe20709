"""Flow row (one explained output, n max-flows) vs rollout of the same 128-token, 6-layer attentions, and
mass-pruned flow (maths.flow_bounded) vs exact on diffuse attention, in one run.

    python benchmarks/bench_flow_row.py
"""
from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from rollout_core.maths.flow import attention_flow  # noqa: E402
from rollout_core.maths.flow_bounded import bounded_attention_flow  # noqa: E402
from rollout_core.maths.rollout import attention_rollout  # noqa: E402


def timed(fn):
    start = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - start


def main() -> None:
    torch.set_num_threads(1)
    g = torch.Generator().manual_seed(0)
    text = torch.softmax(torch.randn(6, 1, 12, 128, 128, generator=g) * 3, -1)
    _, t_roll = timed(lambda: [attention_rollout(list(text)) for _ in range(20)])
    _, t_row = timed(lambda: attention_flow(list(text), output_tokens=[0]))
    print(f"load {os.getloadavg()[0]:.2f}; 128 tokens x 6 layers: flow row {t_row:.2f} s, rollout {t_roll / 20 * 1e3:.1f} ms,"
          f" ratio {t_row / (t_roll / 20):.0f} rollouts")
    diffuse = torch.softmax(torch.randn(12, 1, 3, 197, 197, generator=g, dtype=torch.float64) * 0.1, -1)
    exact, t_exact = timed(lambda: attention_flow(list(diffuse), output_tokens=[0]))
    approx, t_approx = timed(lambda: bounded_attention_flow(list(diffuse), eps=0.3, output_tokens=[0]))
    print(f"diffuse 197 x 12, eps 0.3: exact {t_exact:.1f} s, pruned {t_approx:.1f} s ({t_exact / t_approx:.1f}x),"
          f" error {float((approx.values - exact).abs().max()):.1e}, bound {approx.error_bound:.1e}")


if __name__ == "__main__":
    main()
