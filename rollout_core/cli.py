"""`python -m rollout_core {text,image,models,setup,evaluate}`.

Exit status: 0 done; 2 for anything the user can fix (a `RolloutError` or a bad command line), with
exactly one `error: ...` line on stderr; 1 for a bug (`error: internal: ...`). Heavy imports (torch,
transformers) happen only after the command line is parsed, so usage errors are instant.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import warnings
from typing import Any, Sequence

from rollout_core import methods
from rollout_core.errors import InputError, RolloutError
from rollout_core.options import OPTIONS, Options, validate
from rollout_core.settings import check_settings
from rollout_core.warm.channel import CLI_ENV_DEFAULTS
from rollout_core.warm.client import run_remote

BAR_WIDTH = 30


class _Parser(argparse.ArgumentParser):
    """argparse that reports a bad command line as one `error: ...` line and exit status 2."""

    def error(self, message: str) -> None:  # type: ignore[override]
        _fail(f"{message} (see `{self.prog} --help`)")


def _fail(message: str, status: int = 2) -> None:
    print("error: " + " ".join(str(message).split()), file=sys.stderr)
    raise SystemExit(status)


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="python -m rollout_core", description="Attention rollout, flow and gradient rollout.")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)

    text = sub.add_parser("text", help="explain a text")
    text.add_argument("--model", help="registry name, local folder or hub id (default: default-text)")
    text.add_argument("given", nargs="?", metavar="TEXT", help='the text; "-" reads it from stdin')
    text.add_argument("--text", help="the same as TEXT")
    image = sub.add_parser("image", help="explain an image")
    image.add_argument("--model", help="registry name, local folder or hub id (default: default-image)")
    image.add_argument("given", nargs="?", metavar="IMAGE", help="image file")
    image.add_argument("--image", help="the same as IMAGE")
    for command, p in (("text", text), ("image", image)):
        add_option_flags(p, command)
        p.add_argument("--json", action="store_true", help="print one JSON object (Explanation.to_dict())")
        if command == "text":
            p.add_argument("--tokens", action="store_true",
                           help="one row per token (word pieces as the model reads them) instead of per word")
        p.add_argument("--allow-pickle", action="store_true",
                       help="allow pickle weights (.bin/.pt): they can run code when loaded; only for trusted models")

    models = sub.add_parser("models", help="list the registry's models")
    models.add_argument("--json", action="store_true")
    setup = sub.add_parser("setup", help="build the embedded default models")
    setup.add_argument("--force", action="store_true", help="rebuild even when present")
    serve = sub.add_parser("serve", help="keep a warm process that later text, image and models commands use",
                           description="Import torch and transformers once and keep models loaded; while it runs, "
                           "`text`, `image` and `models` commands of this user hand their work to it (same output "
                           "and exit status; ROLLOUT_SERVER=off skips it). It serves one command at a time.")
    serve.add_argument("--idle-minutes", type=float, default=30.0,
                       help="exit after this many minutes without a command (0: never; default 30)")
    serve.add_argument("--preload", nargs="*", metavar="MODEL",
                       help="models to load at start (default: the embedded default models that are built)")
    action = serve.add_mutually_exclusive_group()
    action.add_argument("--detach", action="store_true", help="start in the background; return once it answers")
    action.add_argument("--status", action="store_true", help="say whether a server runs (exit 1 when none answers)")
    action.add_argument("--stop", action="store_true", help="stop the running server")
    sub.add_parser("evaluate", help="faithfulness evaluation (see `evaluate --help`)", add_help=False)
    sub.add_parser("corpus", help="explain a whole corpus (see `corpus --help`)", add_help=False)
    return parser


def add_option_flags(parser: argparse.ArgumentParser, command: str) -> None:
    """The explain options' flags for `command` ("text" or "image"), one per `options.OPTIONS` entry that has a
    flag: type, choices, default and help from the table (its ranges are checked by `options.validate`)."""
    for o in OPTIONS:
        if o.flag is None or command not in o.commands:
            continue
        if o.kind == "switch":
            parser.add_argument(o.flag, dest=o.name, action="store_true", help=o.full_help())
            continue
        kwargs: dict[str, Any] = {"dest": o.name, "default": o.default, "help": o.full_help()}
        if o.kind == "method":
            kwargs["choices"] = methods.names()
        elif o.kind == "choice":
            kwargs.update(choices=o.choices, help=f"{o.full_help()} (default: {o.default})")
        elif o.kind == "number":
            kwargs.update(type=float, help=f"{o.full_help()} ({o.low:g} to {o.high:g}; default: {o.default:g})")
        elif o.kind in ("layer", "count"):
            kwargs["type"] = int
        parser.add_argument(o.flag, **kwargs)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI; returns the exit status (errors exit through SystemExit with one stderr line).
    Run as a program (`argv` None), it hands the command to this user's warm server when one runs (`serve`)."""
    if argv is None:
        served = run_remote(sys.argv[1:])
        if served is not None:
            return served
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] in (["evaluate"], ["corpus"]):  # its options belong to the evaluate module: pass them on untouched
        args = argparse.Namespace(command=argv[0], args=argv[1:])
    else:
        args = build_parser().parse_args(argv)
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            check_settings()
            _quiet_libraries()
            status = _COMMANDS[args.command](args)
        for w in caught:
            if w.category.__name__ == "PickleWeightsWarning":
                print("warning: " + " ".join(str(w.message).split()), file=sys.stderr)
        return status
    except RolloutError as err:
        _fail(str(err))
    except BrokenPipeError:  # output piped into `head` and closed: not an error
        sys.stdout = open(os.devnull, "w")
        return 0
    except KeyboardInterrupt:
        _fail("interrupted", 130)
    except Exception as err:  # a bug: one line, no traceback
        _fail(f"internal: {type(err).__name__}: {err}", 1)
    return 1


def _quiet_libraries() -> None:
    for name, value in CLI_ENV_DEFAULTS.items():
        os.environ.setdefault(name, value)


# ----------------------------------------------------------------------------------------------
# Commands


def _request(args: argparse.Namespace) -> tuple[Options, dict[str, Any]]:
    """The command line's `Options` and per-request arguments (target, labels, max_length), checked against the
    options table before the model is loaded (the same checks `explain` makes; the layer range needs the model)."""
    given = {o.name: getattr(args, o.name) for o in OPTIONS if hasattr(args, o.name)}
    options = validate(Options(**{o.name: given[o.name] for o in OPTIONS if o.field and o.name in given}))
    request = {o.name: o.check(given[o.name]) for o in OPTIONS if not o.field and o.name in given}
    if request.get("labels") is not None:
        request["labels"] = [x.strip() for x in request["labels"].split(",") if x.strip()]
    return options, request


def _load(name: str | None, modality: str, allow_pickle: bool) -> Any:
    import transformers

    from rollout_core.models.loading import load_model
    from rollout_core.models.registry import DEFAULTS

    transformers.utils.logging.disable_progress_bar()
    transformers.utils.logging.set_verbosity_error()
    return load_model(name or DEFAULTS[modality], allow_pickle=allow_pickle)


def _the_input(args: argparse.Namespace, option: str) -> str:
    """The text or image given once, as the positional argument or with --text / --image."""
    flagged = getattr(args, option)
    if flagged is not None and args.given is not None:
        raise InputError(f"the {option} was given twice (as an argument and with --{option}); give it once")
    if flagged is None and args.given is None:
        raise InputError(f"no {option} given: pass it as an argument or with --{option}"
                         + (' ("-" reads it from stdin)' if option == "text" else ""))
    return flagged if flagged is not None else args.given


def _cmd_text(args: argparse.Namespace) -> int:
    given = _the_input(args, "text")
    try:
        text = sys.stdin.read() if given == "-" else given
    except UnicodeDecodeError as err:
        raise InputError(f"the text on stdin is not valid UTF-8 (byte {err.start}); convert it to UTF-8") from None
    options, request = _request(args)
    from rollout_core.explain import explain_text

    explanation = explain_text(_load(args.model, "text", args.allow_pickle), text, **options.kwargs(), **request)
    print(explanation.to_json() if args.json else render_text(explanation, tokens=args.tokens))
    return 0


def _cmd_image(args: argparse.Namespace) -> int:
    from pathlib import Path

    from rollout_core.explain import explain_image

    given = _the_input(args, "image")
    options, request = _request(args)
    path = Path(given).expanduser()
    if not path.is_file():
        raise InputError(f"no such image file: {given}")
    explanation = explain_image(_load(args.model, "image", args.allow_pickle), path, **options.kwargs(), **request)
    print(explanation.to_json() if args.json else render_image(explanation))
    return 0


def _cmd_models(args: argparse.Namespace) -> int:
    from rollout_core.models.registry import is_available, list_models

    rows = [
        {"name": e.name, "family": e.family, "task": e.task, "modality": e.modality,
         "kind": "embedded" if e.embedded else "hub",
         "status": ("ready" if is_available(e) else "run setup" if e.built_by_setup else "missing")
         if e.embedded else "needs the hub",
         "description": e.description}
        for e in list_models()
    ]
    if args.json:
        print(json.dumps(rows, ensure_ascii=False))
        return 0
    width = max(len(r["name"]) for r in rows)
    for r in rows:
        print(f"{r['name']:<{width}}  {r['task']:<20}  {r['family']:<10}  {r['status']:<13}  {r['description']}")
    return 0


def _cmd_setup(args: argparse.Namespace) -> int:
    from rollout_core.build import build_all

    for line in build_all(force=args.force):
        print(line)
    return 0


def _cmd_serve(args: argparse.Namespace) -> int:
    from rollout_core.warm import client, server

    if args.status or args.stop:
        reply = client.control("stop" if args.stop else "status")
        print(server.describe(reply) if args.status or reply is None else f"server stopped (pid {reply['pid']})")
        return 1 if args.status and reply is None else 0
    if not 0 <= args.idle_minutes < float("inf"):
        raise InputError(f"--idle-minutes must be 0 (never) or a positive number of minutes, not {args.idle_minutes:g}")
    if args.detach:
        argv = ["--idle-minutes", f"{args.idle_minutes:g}"] + (["--preload", *args.preload] if args.preload is not None
                                                                 else [])
        print(server.start_detached(argv))
        return 0
    server.serve(main, args.idle_minutes * 60, args.preload, lambda line: print(line, flush=True))
    # the server has cleaned up (socket, lock): the process ends now, without the interpreter's shutdown, which stops
    # a daemon thread still loading flow's kernels in the middle of numba's C++ (std::terminate: exit by SIGABRT)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


def _cmd_evaluate(args: argparse.Namespace) -> int:
    try:
        from rollout_core.faithfulness import cli_evaluate
    except ImportError:
        raise RolloutError("the evaluate command is not available in this version") from None
    return int(cli_evaluate.main(list(args.args)) or 0)


def _cmd_corpus(args: argparse.Namespace) -> int:
    from rollout_core.corpus import cli as corpus_cli

    return corpus_cli.main(list(args.args))


_COMMANDS = {"text": _cmd_text, "image": _cmd_image, "models": _cmd_models, "setup": _cmd_setup,
             "serve": _cmd_serve, "evaluate": _cmd_evaluate, "corpus": _cmd_corpus}


# ----------------------------------------------------------------------------------------------
# Plain-text output


def _bar(value: float, top: float) -> str:
    filled = 0 if top <= 0 else round(BAR_WIDTH * value / top)
    return "█" * filled + "·" * (BAR_WIDTH - filled)


def _signed_bar(value: float, top: float) -> str:
    """A diverging bar centred at 0: evidence against grows left of the centre line, evidence for grows right."""
    half = BAR_WIDTH // 2
    size = 0 if top <= 0 else min(half, round(half * abs(value) / top))
    left, right = ("▒" * size, "") if value < 0 else ("", "█" * size)
    return "·" * (half - len(left)) + left + "|" + right + "·" * (half - len(right))


def _bars(values: Sequence[float], signed: bool, positions: int | None = None) -> list[str]:
    """One bar per value on the figures' scale (`colour_range`): signed values around 0; shares from 0 to the
    largest, but never below twice the uniform share of the `positions` (default: the values shown), so a flat
    map reads as short bars instead of every bar stretched to full width."""
    import numpy as np

    from rollout_core.figures._common import FLAT_FLOOR, colour_range

    array = np.asarray(values, dtype=np.float64)
    top = colour_range(array, signed)[1] if array.size else 0.0
    if not signed and positions:
        top = max(top, FLAT_FLOOR / positions)
    return [(_signed_bar if signed else _bar)(float(v), top) for v in array]


def _header(e: Any) -> list[str]:
    default = e.settings.get("method_default")
    method = f"{methods.display_name(e.method)} [{e.method}]" + (f" ({default})" if default else "")
    lines = [f"model: {e.model_name}   method: {method}   explained: {e.target_description}"]
    facts = methods.describe(e.method, e.settings)
    if facts:
        lines.append(facts)
    if e.extras.get("generated_text") is not None:
        lines.append(f"generated: {e.extras['generated_text']!r}")
    if e.prediction:
        lines.append("prediction: " + ", ".join(f"{p.label!r} {p.probability:.3f}" for p in e.prediction))
    lines += [f"note: {note}" for note in e.warnings]
    return lines


def _summary(e: Any) -> list[str]:
    """The pages' plain-language paragraph (rollout_core.summary), wrapped for a terminal."""
    import textwrap

    from rollout_core.summary import summarize

    return textwrap.wrap(summarize(e), width=110, initial_indent="summary: ", subsequent_indent="  ")


def _value(value: float, signed: bool) -> str:
    """A shown value: with its sign for signed methods (evidence for +, against -)."""
    return f"{value:+.4f}" if signed else f"{value:.4f}"


def _signed_legend(e: Any, unit: str) -> str:
    return (f"signed: each {unit}'s share of the total size of the evidence; right of | for "
            f"{e.target!r}, left (▒) against it")


def _unreadable(e: Any) -> str | None:
    """The header and one line instead of the map when the method says its map cannot be read (its note above)."""
    if not e.not_meaningful:
        return None
    return "\n".join(_header(e) + ["map not shown: it is not meaningful here (see the note above); --json keeps "
                                   "its numbers"])


def render_text(e: Any, tokens: bool = False) -> str:
    """A table of the text's words (or with `tokens`, its shown tokens: special tokens left out), their shares
    renormalised, with bars; signed methods on a diverging bar (for / against); then the summary."""
    if (unreadable := _unreadable(e)) is not None:
        return unreadable
    from rollout_core.compare import word_scores

    if tokens or e.text is None or e.offsets is None:
        names, scores = e.display_tokens(), [float(s) for s in e.display_scores()]
    else:
        merged = word_scores(e)
        names, scores = [w for w, *_ in merged], [float(s) for *_, s in merged]
    width = min(24, max((len(repr(t)) for t in names), default=5))
    rows = [f"{repr(t)[:width]:<{width}}  {bar}  {_value(s, e.signed)}"
            for t, s, bar in zip(names, scores, _bars(scores, e.signed))]
    legend = [_signed_legend(e, "token" if tokens else "word")] if e.signed else []
    return "\n".join(_header(e) + [""] + legend + rows + [""] + _summary(e))


def render_image(e: Any) -> str:
    """The patch map (rows = image rows) as numbers in percent, then the strongest patches (for and against, for
    signed methods), then the summary."""
    if (unreadable := _unreadable(e)) is not None:
        return unreadable
    grid = e.score_map()
    rows = [" ".join(f"{100 * v:5.1f}" for v in row) for row in grid]
    flat = grid.ravel()
    cols = grid.shape[1]
    if e.signed:
        title = f"patch map {grid.shape[0]}x{grid.shape[1]} (% of the total size; + for {e.target!r}, - against):"
        groups = {"strongest patches for:": [int(i) for i in flat.argsort()[::-1][:10] if flat[i] > 0],
                  "strongest patches against:": [int(i) for i in flat.argsort()[:5] if flat[i] < 0]}
    else:
        title = f"patch map {grid.shape[0]}x{grid.shape[1]} (% of the shown total):"
        groups = {"strongest patches:": [int(i) for i in flat.argsort()[::-1][:10]]}
    listed = [i for order in groups.values() for i in order]
    bars = dict(zip(listed, _bars([float(flat[i]) for i in listed], e.signed, positions=flat.size)))
    best = [line for heading, order in groups.items() if order
            for line in [heading] + [f"{f'patch {i // cols},{i % cols}':<12} {bars[i]}  {_value(flat[i], e.signed)}"
                                     for i in order]]
    return "\n".join(_header(e) + [title] + rows + [""] + best + [""] + _summary(e))
