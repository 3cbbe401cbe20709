"""`rollout corpus compare RUN_A RUN_B [--out report.html] [--json]`: what changed between two runs over one data set.

stdout: the summary line and each class's most moved words (or, with --json, every figure as one JSON document);
--out: the standalone HTML report. Runs over different rows: one `error: ...` line on stderr, exit status 2.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Sequence

from rollout_core.errors import InputError

BY = {"a": "prediction_a", "b": "prediction_b", "label": "label"}


class _Parser(argparse.ArgumentParser):
    """A bad command line is an InputError (one `error: ...` line, exit status 2), not argparse's usage text."""

    def error(self, message: str) -> None:  # type: ignore[override]
        raise InputError(f"{message} (see `{self.prog} --help`)")


def parser() -> argparse.ArgumentParser:
    p = _Parser(
        prog="rollout corpus compare",
        description="Compare two corpus runs over the same rows (two models, checkpoints or methods): prediction "
                    "agreement, rank correlation of the explanations, the words whose mean share moved most per "
                    "class (with bootstrap intervals), and the rows that disagree most.")
    p.add_argument("run_a", metavar="RUN_A", help="a result folder written by `rollout corpus`")
    p.add_argument("run_b", metavar="RUN_B", help="another result folder over the same data")
    p.add_argument("--out", help="write the standalone HTML report here (works offline)")
    p.add_argument("--json", action="store_true", help="print every figure as one JSON document instead of text")
    p.add_argument("--by", choices=tuple(BY), default="a",
                   help="group rows into classes by A's prediction (default), B's prediction or the data's label")
    p.add_argument("--k", type=int, default=5, help="top-k overlap of the two explanations (default 5)")
    p.add_argument("--top", type=int, default=15, help="words kept per class in the moved and top lists")
    p.add_argument("--min-count", type=int, default=5, help="fewest occurrences in a class for a word to be ranked")
    p.add_argument("--replicates", type=int, default=1000, help="bootstrap replicates (default 1000)")
    p.add_argument("--seed", type=int, default=0, help="bootstrap seed")
    p.add_argument("--examples", type=int, default=10, help="rows shown per kind of disagreement")
    p.add_argument("--engine", choices=("local", "ray"), default="local",
                   help="ray: compare the parts on Ray (RAY_ADDRESS, or a local Ray); same figures")
    p.add_argument("--workers", type=int, default=1, help="threads (local) or Ray workers")
    p.add_argument("--scratch", help="folder for partitioning runs stored in different orders (default: a "
                                     "temporary folder; on a Ray cluster, shared storage)")
    return p


def _check_out(out: str) -> None:
    """Refuse an --out that cannot be written before the comparison runs (it takes seconds per 10k rows)."""
    path = Path(out)
    if path.is_dir():
        raise InputError(f"--out {out} is a folder: name the report file, e.g. {path / 'report.html'}")
    if not path.parent.is_dir():
        raise InputError(f"cannot write the report to {out}: the folder {path.parent} does not exist")


def main(argv: Sequence[str]) -> int:
    """Run the comparison; errors surface as rollout_core.errors (the main CLI prints them as one line)."""
    try:
        args = parser().parse_args(list(argv))
    except SystemExit:  # --help, printed
        return 0
    if args.out:
        _check_out(args.out)
    from tqdm import tqdm

    from rollout_core.corpus.compare_report import comparison_json, report_html
    from rollout_core.corpus.compare_runs import compare_runs

    bars: dict[str, tqdm] = {}

    def progress(stage: str, done: int, total: int) -> None:
        bar = bars.get(stage)
        if bar is None:
            bar = bars[stage] = tqdm(total=total, desc=stage, unit="part", file=sys.stderr, disable=None, leave=False)
        bar.update(done - bar.n)

    try:
        result = compare_runs(args.run_a, args.run_b, by=BY[args.by], k=args.k, top=args.top,
                              min_count=args.min_count, replicates=args.replicates, seed=args.seed,
                              examples=args.examples, engine=args.engine, workers=args.workers,
                              scratch=args.scratch, progress=progress)
    finally:
        for bar in bars.values():
            bar.close()
    if args.out:
        try:
            Path(args.out).write_text(report_html(result), encoding="utf-8")
        except OSError as err:
            raise InputError(f"cannot write the report to {args.out}: {err.strerror or err}") from None
    if args.json:
        print(json.dumps(comparison_json(result), ensure_ascii=False, allow_nan=False))
        if args.out:
            print(f"wrote {args.out}", file=sys.stderr)
        return 0
    print(result.summary_line())
    for cls, group in result.moved.groupby("class", sort=True):
        print(f"== {cls}: mean share B - A, {result.settings['level']:.0%} interval")
        print(group[["unit", "count", "mean_a", "mean_b", "diff", "low", "high"]].to_string(index=False))
    if args.out:
        print(f"wrote {args.out}")
    return 0
