"""Row-only streaming rollout on a long decoder: peak memory, disk and time at 4096 and 32768 tokens.

Model: Llama-style decoder with random weights, 16 layers, grouped-query attention (4 query heads over 2 KV
heads, head size 16, hidden 64: small, so the forward is minutes, not hours; the attention work and the layer
files grow with n², not with the hidden size), fp32, CPU, batch 1, the last position explained (its row after
every layer). Each run is a fresh subprocess, like bench_memory.py: build, warm up on 16 tokens, reset the
peak-RSS counter (/proc/self/clear_refs), measure VmHWM - VmRSS around one call under an address-space cap
(RLIMIT_AS), MALLOC_MMAP_THRESHOLD_=1 MiB. Disk is the layer files' size (they exist one at a time per layer
while written, all L at once before the top-down pass, none after).

Modes:
  rows      streaming_rollout(row_only=True): files in the automatic dtype (float32 when it takes at most half
            the free disk, else float16)
  rows16    the same with float16 files
  matrix    the streaming full matrix (the path before row-only mode; reference for the rows' error)

The reference column is what output_attentions=True would keep (estimate_full_capture_bytes): 16 layers x 4
heads x n² fp32 here; a Llama with 16 heads needs 4x that (17 GiB at 4096, the issue's 18 GB).

Run: python benchmarks/bench_long_decoder.py [--lengths 4096 32768] [--cap-gb 10]
"""
from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from bench_memory import measure_child, measure_peak

ROOT = Path(__file__).resolve().parents[1]
MODEL = dict(hidden_size=64, intermediate_size=128, num_hidden_layers=16, num_attention_heads=4,
             num_key_value_heads=2, vocab_size=1000, max_position_embeddings=32768)


def _child(mode: str, n: int, cap_bytes: int, out: str) -> dict:
    """Runs in the subprocess: build, warm up, reset the peak, measure one call; rows saved to `out`."""
    import torch
    import transformers

    torch.set_num_threads(int(os.environ.get("BENCH_THREADS", "2")))
    sys.path.insert(0, str(ROOT))
    from rollout_core.lowmem import streaming_rollout

    torch.manual_seed(0)
    model = transformers.LlamaForCausalLM(transformers.LlamaConfig(**MODEL)).eval()
    handle = type("Handle", (), {"model": model, "device": torch.device("cpu")})()
    options = {"matrix": dict(row_only=False), "rows": dict(row_only=True),
               "rows16": dict(row_only=True, spill_dtype=torch.float16)}[mode]

    def run(length: int):
        ids = torch.randint(5, MODEL["vocab_size"], (1, length), generator=torch.Generator().manual_seed(length))
        return streaming_rollout(handle, {"input_ids": ids}, rows=[length - 1], **options)

    run(16)
    result, measured = measure_peak(lambda: run(n), cap_bytes)
    if result is None:
        return {"mode": mode, "n": n, **measured}
    torch.save(result.layer_rows[:, 0, 0], out)
    spill = result.spill or {}
    return {"mode": mode, "n": n, **measured, "dtype": spill.get("dtype", "-"),
            "disk_mib": spill.get("bytes", 0) / 2**20}


def _measure(mode: str, n: int, cap_bytes: int, out: Path) -> dict:
    return {"mode": mode, "n": n, **measure_child(__file__, [mode, str(n), str(cap_bytes), str(out)], {})}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lengths", type=int, nargs="+", default=[4096, 32768])
    parser.add_argument("--cap-gb", type=float, default=10.0, help="address-space cap per run above the loaded model")
    parser.add_argument("--matrix-up-to", type=int, default=4096, help="also run rows16 and matrix up to this length")
    parser.add_argument("--child", nargs=4, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        mode, n, cap, out = args.child
        print(json.dumps(_child(mode, int(n), int(cap), out)))
        return

    import torch

    sys.path.insert(0, str(ROOT))
    from rollout_core.lowmem import estimate_full_capture_bytes

    cap = int(args.cap_gb * 2**30)
    work = Path(os.environ.get("TMPDIR", "/tmp")) / f"bench_long_decoder_{os.getpid()}"
    work.mkdir(parents=True, exist_ok=True)
    print(f"Llama-style decoder, random weights: {MODEL['num_hidden_layers']} layers, {MODEL['num_attention_heads']} "
          f"query heads / {MODEL['num_key_value_heads']} KV heads, hidden {MODEL['hidden_size']}; fp32, batch 1, "
          f"{os.environ.get('BENCH_THREADS', '2')} threads, cap {args.cap_gb:g} GiB; last position's row after every "
          "layer")
    print(f"{'tokens':>6} | {'mode':>6} | {'files':>7} | {'peak RSS extra':>14} | {'disk':>9} | {'seconds':>7} | "
          f"{'max |rows - matrix rows|':>24} | output_attentions would keep")
    for n in args.lengths:
        modes = ("matrix", "rows", "rows16") if n <= args.matrix_up_to else ("rows",)
        results = {mode: _measure(mode, n, cap, work / f"{mode}_{n}.pt") for mode in modes}
        kept = estimate_full_capture_bytes(MODEL["num_hidden_layers"], MODEL["num_attention_heads"], n) / 2**20
        for mode, r in results.items():
            if "failed" in r:
                print(f"{n:>6} | {mode:>6} | failed: {r['failed']}")
                continue
            error = "-"
            if mode != "matrix" and "failed" not in results.get("matrix", {"failed": 1}):
                error = f"{(torch.load(work / f'{mode}_{n}.pt') - torch.load(work / f'matrix_{n}.pt')).abs().max():.1e}"
            print(f"{n:>6} | {mode:>6} | {r['dtype']:>7} | {r['extra_mib']:>10.0f} MiB | {r['disk_mib']:>5.0f} MiB | "
                  f"{r['seconds']:>7.1f} | {error:>24} | {kept:.0f} MiB", flush=True)
    for file in work.iterdir():
        file.unlink()
    work.rmdir()


if __name__ == "__main__":
    main()
