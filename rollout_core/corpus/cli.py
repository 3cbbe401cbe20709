"""`rollout corpus --data FILE --out DIR ...` explains a corpus; `rollout corpus summary DIR` prints per-class words;
`rollout corpus compare RUN_A RUN_B` compares two runs (`compare_cli`)."""
from __future__ import annotations

import argparse
from typing import Sequence

from rollout_core import methods
from rollout_core.corpus.engine import TOP_K, check_precision, run_corpus
from rollout_core.errors import InputError


def _run_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="rollout corpus", description="Explain every row of a corpus into Parquet chunks (rerun to resume). "
        "`rollout corpus summary DIR` prints the words each predicted class leans on; "
        "`rollout corpus compare RUN_A RUN_B` compares two runs over the same data.")
    parser.add_argument("--data", required=True,
                        help="CSV / JSONL / Parquet with a text column, a datasets save_to_disk folder, "
                             "or an image folder (root/<class>/<image>)")
    parser.add_argument("--out", required=True, help="result folder (Parquet chunks); rerun to resume")
    parser.add_argument("--model", default="default-text")
    parser.add_argument("--method", default="rollout", choices=methods.names())
    parser.add_argument("--engine", choices=("local", "ray"), default="local",
                        help="ray: Ray actors on the cluster in RAY_ADDRESS, or a local Ray")
    parser.add_argument("--limit", type=int, default=None, help="only the first N rows")
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--chunk-rows", type=int, default=256, help="rows per Parquet chunk")
    parser.add_argument("--workers", type=int, default=2,
                        help="threads of one torch thread each (local engine), or Ray actors (ray engine)")
    parser.add_argument("--top-k", type=int, default=TOP_K, help="top words/patches stored per row")
    parser.add_argument("--precision", default="float32",
                        help="float32 (exact) or int8: linear layers quantized to int8, faster and approximate "
                             "(local engine; rollout, flow, attention, sink_free; see docs/CORPUS.md)")
    parser.add_argument("--text-column", default="text")
    return parser


def _summary_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="rollout corpus summary", description="Top words per predicted class.")
    parser.add_argument("out", help="a result folder written by `rollout corpus`")
    parser.add_argument("--top", type=int, default=10)
    parser.add_argument("--min-count", type=int, default=3)
    return parser


def _parse(parser: argparse.ArgumentParser, argv: list[str]) -> argparse.Namespace | None:
    try:
        return parser.parse_args(argv)
    except SystemExit as exit_:
        if exit_.code:
            raise InputError(f"bad arguments (see `{parser.prog} --help`)") from None
        return None


def main(argv: Sequence[str]) -> int:
    """Run `corpus` with its own arguments; errors surface as rollout_core.errors (the main CLI prints them)."""
    argv = list(argv)
    if argv[:1] == ["compare"]:
        from rollout_core.corpus import compare_cli

        return compare_cli.main(argv[1:])
    if argv[:1] == ["summary"]:
        args = _parse(_summary_parser(), argv[1:])
        return 0 if args is None else _summary(args)
    args = _parse(_run_parser(), argv)
    return 0 if args is None else _run(args)


def _summary(args: argparse.Namespace) -> int:
    from rollout_core.corpus.aggregate import class_tokens
    from rollout_core.corpus.engine import read_results

    table = class_tokens(read_results(args.out), min_count=args.min_count)
    for label, group in table.groupby("prediction"):
        print(f"== {label}")
        print(group.head(args.top)[["word", "mean_share", "count", "top1_share"]].to_string(index=False))
    return 0


def _run(args: argparse.Namespace) -> int:
    from rollout_core.corpus.reader import read_corpus

    for name in ("batch_size", "chunk_rows", "workers", "top_k"):
        if getattr(args, name) < 1:
            raise InputError(f"--{name.replace('_', '-')} must be >= 1")
    check_precision(args.precision, args.method)  # here, not as argparse choices: one error line, exit 2
    if args.engine == "ray" and args.precision != "float32":
        raise InputError("--precision int8 is for the local engine (--engine local)")
    corpus = read_corpus(args.data, text_column=args.text_column, limit=args.limit)
    report = run_corpus(args.model, corpus, args.out, method=args.method, batch_size=args.batch_size,
                        chunk_rows=args.chunk_rows, top_k=args.top_k, workers=args.workers, precision=args.precision,
                        engine=args.engine)
    print("\n".join(report.lines()))
    return 0
