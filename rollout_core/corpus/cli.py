"""`rollout corpus run|summary`: explain a corpus file into a result folder, or print per-class words."""
from __future__ import annotations

import argparse
from typing import Sequence

from rollout_core.errors import InputError


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="rollout corpus", description=__doc__)
    sub = parser.add_subparsers(dest="action", required=True)
    run = sub.add_parser("run", help="explain every row of a CSV/JSONL/Parquet file (resumable)")
    run.add_argument("input", help="corpus file with a text column")
    run.add_argument("--out", required=True, help="result folder (Parquet chunks); rerun to resume")
    run.add_argument("--model", default="default-text")
    run.add_argument("--method", default="rollout")
    run.add_argument("--batch-size", type=int, default=16)
    run.add_argument("--chunk-rows", type=int, default=256)
    run.add_argument("--text-column", default="text")
    run.add_argument("--engine", choices=("local", "ray"), default="local")
    summary = sub.add_parser("summary", help="top words per predicted class of a result folder")
    summary.add_argument("out")
    summary.add_argument("--top", type=int, default=10)
    summary.add_argument("--min-count", type=int, default=3)
    return parser


def main(argv: Sequence[str]) -> int:
    """Run `corpus` with its own arguments; errors surface as rollout_core.errors (the main CLI prints them)."""
    try:
        args = build_parser().parse_args(list(argv))
    except SystemExit as exit_:
        if exit_.code:
            raise InputError("bad corpus arguments (see `rollout corpus --help`)") from None
        return 0
    if args.action == "summary":
        from rollout_core.corpus.aggregate import class_tokens
        from rollout_core.corpus.engine import read_results

        table = class_tokens(read_results(args.out), min_count=args.min_count)
        for label, group in table.groupby("prediction"):
            print(f"== {label}")
            print(group.head(args.top)[["word", "mean_share", "count", "top1_share"]].to_string(index=False))
        return 0
    from rollout_core.corpus.reader import read_corpus
    from rollout_core.models.loading import load_model

    corpus = read_corpus(args.input, text_column=args.text_column)
    if args.engine == "ray":
        from rollout_core.corpus.ray_engine import run_ray

        run_ray(args.model, corpus, args.out, method=args.method, batch_size=args.batch_size)
    else:
        from rollout_core.corpus.engine import run_local

        run_local(load_model(args.model), corpus, args.out, method=args.method,
                  batch_size=args.batch_size, chunk_rows=args.chunk_rows)
    return 0
