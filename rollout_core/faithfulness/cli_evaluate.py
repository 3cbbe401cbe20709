"""`python -m rollout_core evaluate`: faithfulness measures over a data set -> a CSV and a markdown table.

    python -m rollout_core evaluate --model default-text --dataset text --limit 100 --out evaluation/

Without --dataset, the model's generated test set is used ('text' for a text model, 'image' for an image
model; no model either: 'text' on default-text). Writes <out>/<name>.csv (one row per example and method, random
baseline included) and <out>/<name>.md (the method x measure summary, mean ± std, with the command that produced
it); <name> is the data set ("text", "image") or the CSV file / folder name, and prints the table and where it wrote
them on stdout.
With --record (registry models only) the per-method summary is also stored in
rollout_core/models/measured/<model>.json, from which the model's default method is derived.
Progress goes to stderr. Errors the user can fix end
in one "error: ..." line and exit status 2. Runs standalone too: `python -m rollout_core.faithfulness.cli_evaluate`.
"""
from __future__ import annotations

import argparse
import shlex
import sys
import time
from pathlib import Path
from typing import Sequence

from rollout_core.errors import RolloutError

DEFAULT_OUT = "evaluation"


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # one line, exit 2 (argparse prints the whole usage)
        raise _UsageError(message)


class _UsageError(Exception):
    pass


def build_parser(prog: str = "python -m rollout_core evaluate") -> argparse.ArgumentParser:
    from rollout_core.faithfulness.evaluate import AGREEMENT, FULL_GRID, GRIDS, METHODS, RANDOM_SEEDS, REFERENCES

    parser = _Parser(prog=prog, description="Measure how faithfully each explanation method tracks the model.")
    parser.add_argument("--model", default=None,
                        help="registry name, folder or hub id (default: the data set's default model)")
    parser.add_argument("--dataset", default=None,
                        help="'text' or 'image' (generated, with ground truth), a CSV with text,label columns, "
                             "or a folder with one sub-folder of images per class (default: the generated set "
                             "of the model's kind, 'text' or 'image')")
    parser.add_argument("--methods", nargs="+", default=None, choices=[*METHODS, *REFERENCES],
                        help="methods to measure (default: every method for the model's kind of input; the random "
                             "baseline is always added)")
    parser.add_argument("--limit", type=int, default=None, help="at most this many examples (generated sets: 100)")
    parser.add_argument("--seeds", type=int, default=RANDOM_SEEDS,
                        help=f"random orderings per example for the baseline (default {RANDOM_SEEDS}: the random row "
                             "is the mean over the examples' own orderings; more make a small set's chance line "
                             "steadier)")
    parser.add_argument("--data-seed", type=int, default=0,
                        help="generated sets: which draw (default 0, the recorded tables'); every seed gives "
                             "examples the model never trained on, to check that a figure holds on fresh data")
    parser.add_argument("--grid", choices=list(GRIDS), default=FULL_GRID,
                        help=f"the fractions removed / put back that each curve is read at: "
                             f"{'; '.join(g.words() for g in GRIDS.values())} (default {FULL_GRID}, the full "
                             "protocol of the recorded tables; --record needs it). A coarser grid scores fewer "
                             "perturbed inputs per example")
    parser.add_argument("--out", default=DEFAULT_OUT, help=f"output folder (default: ./{DEFAULT_OUT}/)")
    parser.add_argument("--references", nargs="+", default=None, choices=list(AGREEMENT), metavar="REF",
                        help="attention-free references for the agreement columns: gxi (gradient x input, "
                             "spearman_gxi), ig (integrated gradients, spearman_ig). Default: gxi ig for text, gxi "
                             "for images (integrated gradients cost about 40 explanations of an image; ask with "
                             "--references gxi ig); a reference not computed shows as 'not computed'")
    parser.add_argument("--no-agreement", action="store_true",
                        help="skip the gradient x input / integrated gradients references (spearman columns "
                             "not computed): faster, enough for --record")
    parser.add_argument("--record", action="store_true",
                        help="also store the per-method summary with the registry model "
                             "(rollout_core/models/measured/<model>.json): the app's default method and the "
                             "figures its method picker shows come from that file")
    parser.add_argument("--engine", choices=("local", "ray"), default="local",
                        help="ray: spread the examples over Ray actors (RAY_ADDRESS for a cluster), same results")
    parser.add_argument("--workers", type=int, default=2,
                        help="examples evaluated at once: threads of one torch thread each (local engine; 1: one "
                             "example at a time on torch's own threads) or Ray actors (--engine ray)")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command; returns the exit status (0 ok, 2 user error)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        args = build_parser().parse_args(argv)
        return _run(args, argv)
    except (_UsageError, RolloutError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2


def _run(args: argparse.Namespace, argv: list[str]) -> int:
    from tqdm import tqdm

    from rollout_core.faithfulness.evaluate import FULL_GRID, evaluate_dataset

    if args.seeds < 1:
        raise _UsageError("--seeds must be at least 1")
    if args.data_seed < 0:
        raise _UsageError("--data-seed must be 0 or more")
    if args.no_agreement and args.references:
        raise _UsageError("--references and --no-agreement exclude each other")
    if args.record and args.grid != FULL_GRID:
        raise _UsageError(f"--record stores the full protocol's figures: drop --grid {args.grid} (or use "
                          f"--grid {FULL_GRID})")
    if args.dataset is None:
        args.dataset = _default_dataset(args.model)
    recorded = _recorded_name(args.model, args.dataset) if args.record else None
    dataset = args.dataset if args.dataset in ("text", "image") else str(Path(args.dataset).expanduser())
    name = args.dataset if args.dataset in ("text", "image") else Path(dataset).stem or "dataset"
    out = Path(args.out).expanduser()
    bars: list[tqdm] = []  # opened once the data set is read, so a bad data set prints only its error

    def progress(done: int, total: int) -> None:
        if not bars:
            bars.append(tqdm(total=total, desc=f"evaluate {name}", unit="example", file=sys.stderr))
        bars[0].update(done - bars[0].n)

    started = time.perf_counter()
    try:
        result = evaluate_dataset(args.model, dataset, args.methods, limit=args.limit, progress=progress,
                                  seeds=args.seeds, agreement=not args.no_agreement, references=args.references,
                                  engine=args.engine, workers=args.workers, data_seed=args.data_seed,
                                  grid=args.grid)
    finally:
        for bar in bars:
            bar.close()
    seconds = time.perf_counter() - started
    try:
        out.mkdir(parents=True, exist_ok=True)
        result.per_example.to_csv(out / f"{name}.csv", index=False)
        (out / f"{name}.md").write_text(_report(result, args, argv, seconds), encoding="utf-8")
    except OSError as err:
        raise RolloutError(f"could not write the results to {out}: {err}") from err
    print(result.markdown() + _not_computed(result))
    print(f"wrote {name}.csv and {name}.md to {out} ({result.count} examples, {seconds:.0f} s)")
    if recorded is not None:
        from rollout_core import methods
        from rollout_core.models import measured

        try:
            path = measured.record(recorded, result.summary, dataset=name, examples=result.count,
                                   accuracy=result.accuracy, seeds=args.seeds,
                                   command=f"python -m rollout_core evaluate {shlex.join(argv)}")
        except OSError as err:
            raise RolloutError(f"could not record the figures of {recorded}: {err}") from err
        best = measured.default_method(recorded, methods.names())
        print(f"recorded {recorded}'s figures in {path}; its default method is now {best}")
    return 0


def _recorded_name(model: str | None, dataset: str) -> str:
    """The registry name that --record stores under (checked before the long run starts)."""
    from rollout_core.models import registry

    if model is None:
        if dataset not in registry.DEFAULTS:
            raise _UsageError("--record needs --model with a registry model name")
        return registry.DEFAULTS[dataset]
    entry = registry.lookup(model)
    if entry is None:
        raise _UsageError(f"--record stores figures for registry models only; {model!r} is not one "
                          "(see `python -m rollout_core models`)")
    return entry.name


def _default_dataset(model: str | None) -> str:
    """The generated set matching the model's modality ('text' without a model: default-text)."""
    if model is None:
        return "text"
    from rollout_core.models import registry

    entry = registry.lookup(model)
    if entry is not None:
        return entry.modality
    from rollout_core.models.loading import load_model

    return load_model(model).modality


def _not_computed(result) -> str:
    """A line per measure left empty because its reference was not asked for, saying how to ask."""
    from rollout_core.faithfulness.evaluate import AGREEMENT

    return "".join(f"{measure}: not computed (ask with --references {' '.join(AGREEMENT)}).\n"
                   for measure in result.not_computed)


def _report(result, args: argparse.Namespace, argv: list[str], seconds: float) -> str:
    from rollout_core.faithfulness.evaluate import GRIDS

    grid = GRIDS[result.grid]
    model = args.model or ("the default model" if args.dataset not in ("text", "image") else f"default-{args.dataset}")
    return (
        f"# Faithfulness: {model} on {args.dataset}\n\n"
        f"Command: `python -m rollout_core evaluate {shlex.join(argv)}`\n\n"
        f"{result.count} examples, model accuracy {result.accuracy:.3f}, random baseline = mean of {args.seeds} "
        f"random ordering(s) per example, curves read at {grid.words()}, {seconds:.0f} s.\n\n"
        + result.markdown()
        + "\n↓ lower is better, ↑ higher is better; mean ± std over examples. deletion/insertion: area under the "
        "probability of the predicted class as the top fraction of tokens/patches is removed / put back "
        f"(0..1 in steps of {grid.curve[1]:g}). positive/negative: Chefer et al. (CVPR 2021) accuracy AUC x 100 "
        f"when the most / least important positions are removed first (0..{grid.chefer[-1]:g}). pointing_game, "
        "mass_share, iou (top positions "
        "holding 50% of the score): against the known deciding region (n/a without one). spearman_gxi / "
        "spearman_ig: rank correlation with gradient x input / integrated gradients on the input embeddings "
        "(text) or pixels (images).\n"
        + (f"\n{_not_computed(result)}" if result.not_computed else "")
    )


if __name__ == "__main__":
    sys.exit(main())
