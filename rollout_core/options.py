"""The explain options, each declared once (`OPTIONS`), and `Options`, the frozen method options passed whole.

One `OptionSpec` per option says its type, default, range or choices, help, which methods read it, its command-line
flag, its URL key and sidebar label. The CLI's flags (`cli.add_option_flags`), the sidebar's widgets
(`app_pages/_lib/sidebar.py`) and the checks of `explain` (`validate`, `check`) are built from this table, so their
ranges agree (tests/test_options_table.py). Torch-free, so the command line checks a request before heavy imports.
"""
from __future__ import annotations

import dataclasses
import math
import numbers
from dataclasses import dataclass
from typing import Any

from rollout_core.errors import InputError

HEAD_FUSIONS = ("mean", "max", "min")
CAPTURES = ("auto", "full", "lowmem")


@dataclass(frozen=True)
class OptionSpec:
    """One explain option. `kind`: "method" (a registered method's name, or None for the model's measured default),
    "choice", "number" (a finite float in [low, high]), "layer" (an integer layer index; negative counts from the
    end, the range is the model's), "switch" (a bool), "count" (an integer of at least `low`, or None), "target"
    (a label, an index or a position), "labels" (a list of strings)."""

    name: str  # the keyword of `explain` (and the field of `Options` when `field`)
    kind: str
    default: Any
    help: str  # one line for the CLI's --help and the sidebar's tooltip
    flag: str | None = None  # the command-line flag (None: not on the command line)
    url: str | None = None  # the sidebar's URL key (None: no sidebar widget)
    label: str = ""  # the sidebar widget's label
    choices: tuple[str, ...] | None = None  # kind "choice"
    low: float | None = None  # inclusive bounds of kind "number" (and the least value of a "count")
    high: float | None = None
    step: float | None = None  # the sidebar slider's step
    uses: str | None = None  # the `MethodSpec` flag that says whether a method reads it (None: every method does)
    applies: str = ""  # when it applies, in words (help texts and docs)
    commands: tuple[str, ...] = ("text", "image")  # the inputs (CLI commands) that take it
    field: bool = True  # a field of `Options`; else an argument of the request (target, labels, max_length)

    def check(self, value: Any) -> Any:
        """`value` checked against this option's type and range (layers: type only, `resolve_layer` does the
        range), converted (numbers to float, switches to bool); `InputError` naming the option otherwise."""
        if self.kind == "choice":
            if value not in (self.choices or ()):
                raise InputError(f"unknown {self.name.replace('_', ' ')} {value!r}; choose one of: "
                                 f"{', '.join(self.choices or ())}")
            return value
        if self.kind == "number":
            if isinstance(value, bool) or not isinstance(value, numbers.Real) or not math.isfinite(value):
                raise InputError(f"{self.name} must be a finite number, not {value!r}")
            if not self.low <= value <= self.high:  # type: ignore[operator]
                raise InputError(f"{self.name} must be between {self.low:g} and {self.high:g}, not {value!r}")
            return float(value)
        if self.kind in ("layer", "count"):
            if value is None and self.default is None:
                return None
            if isinstance(value, bool) or not isinstance(value, numbers.Integral):
                raise InputError(f"{self.name} must be an integer, not {value!r}")
            if self.kind == "count" and value < self.low:  # type: ignore[operator]
                raise InputError(f"{self.name} must be an integer of at least {self.low:g}, not {value!r}")
            return int(value)
        if self.kind == "switch":
            return bool(value)
        return value

    def resolve_layer(self, value: int | None, layers: int) -> int:
        """A checked layer index as a number in the model's range: start_layer in [0, layers), end_layer (exclusive)
        in [1, layers]; negative counts from the end, None (end_layer) is `layers`."""
        if value is None:
            return layers
        bound = layers + 1 if self.name == "end_layer" else layers
        resolved = value + (bound if value < 0 else 0)
        if not 0 <= resolved < bound:
            raise InputError(f"{self.name} {resolved} is out of range: the model has {layers} layers")
        return resolved

    def allowed(self) -> str:
        """The values it takes, in words (the docs' table)."""
        if self.kind == "choice":
            return ", ".join(f"`{c}`" for c in self.choices or ())
        if self.kind == "number":
            return f"{self.low:g} to {self.high:g}"
        if self.kind == "count":
            return f"a whole number of at least {self.low:g}"
        return {"method": "a registered method's name (`python -m rollout_core text --help` lists them)",
                "layer": "a layer index of the model (negative counts from the end)", "switch": "on or off",
                "target": "a class label or index, or a position", "labels": "a list of label names"}[self.kind]

    def full_help(self) -> str:
        """The help line with when it applies (the CLI's --help and the sidebar's tooltip)."""
        return self.help + (f"; used by {self.applies}" if self.applies else "")

    def layer_bounds(self, layers: int) -> tuple[int, int]:
        """The non-negative values this layer option takes on a model of `layers` layers (the sidebar's range)."""
        return (1, layers) if self.name == "end_layer" else (0, layers - 1)


OPTIONS: tuple[OptionSpec, ...] = (
    OptionSpec("method", "method", None, flag="--method", url="method", label="Method",
               help="the explanation method (default: the model's measured best, rollout without measured figures)"),
    OptionSpec("head_fusion", "choice", "mean", choices=HEAD_FUSIONS, flag="--head-fusion", url="fusion",
               label="Head fusion", uses="uses_head_fusion", applies="methods that fuse a layer's heads",
               help="how the heads of a layer are combined (gradient rollout weights heads itself)"),
    OptionSpec("residual_weight", "number", 1.0, low=0.0, high=3.0, step=0.1, flag="--residual-weight",
               url="residual", label="Residual weight", uses="uses_residual",
               applies="methods that add the residual to the attention",
               help="Ã = rownorm(A + w·I); w = 1 is the paper's 0.5·A + 0.5·I, w = 0 raw products"),
    OptionSpec("discard_ratio", "number", 0.0, low=0.0, high=0.95, step=0.05, flag="--discard-ratio",
               url="discard", label="Discard ratio", uses="uses_discard",
               applies="methods that roll out a product of layer matrices (attention or contributions)",
               help="zero this fraction of the lowest fused attention before the residual (vit-explain)"),
    OptionSpec("start_layer", "layer", 0, flag="--start-layer", url="start", label="Start layer",
               uses="cumulative", applies="methods that roll out from a start layer (not one map of the whole "
               "model, not one layer's attention)",
               help="roll out from this layer (0 = the first; negative counts from the end); a method that reads "
                    "only the fine-tuned layers raises it to the first of them"),
    OptionSpec("end_layer", "layer", None, flag="--end-layer",
               help="roll out up to this layer, exclusive (default: through the last layer)"),
    OptionSpec("keep_heads", "switch", False,
               help="keep every head's attention of every layer (the per-head view; about 10x the memory)"),
    OptionSpec("capture", "choice", "auto", choices=CAPTURES, flag="--capture",
               help="full: keep every layer's attention; lowmem: stream them (long inputs); auto: lowmem only when "
                    "the attentions would not fit the memory budget"),
    OptionSpec("full_matrix", "switch", False, flag="--full-matrix", applies="attention flow",
               help="flow: also compute the whole n x n matrix (n² max flows; the output says the cost)"),
    OptionSpec("target", "target", None, flag="--target", url="target", label="Target", field=False,
               help="the class label or index (default: predicted); causal LMs: the position whose next-token "
                    "prediction is explained (default: the last); encoder-decoders: the decoder position"),
    OptionSpec("labels", "labels", None, flag="--labels", commands=("text",), field=False,
               applies="sentence encoders (zero-shot)",
               help="zero-shot labels for sentence encoders (CLI: comma-separated: a,b,c)"),
    OptionSpec("max_length", "count", None, low=2, flag="--max-length", commands=("text",), field=False,
               help="cut the text at this many tokens (default: the model's limit)"),
)
"""Every explain option, in the order the CLI's help and the sidebar show them."""

SPECS = {o.name: o for o in OPTIONS}


def spec(name: str) -> OptionSpec:
    """The declaration of option `name`."""
    return SPECS[name]


@dataclass(frozen=True)
class Options:
    """Method options, passed whole: frozen, so the pages key their caches on it.

    As asked for (the sidebar, `explain(model, x, options)`) `method` may be None (the model's measured default) and
    `end_layer` None (through the last layer); the validated object a method's compute receives has both resolved.
    The fields, their defaults, ranges and help are `OPTIONS`' (a test keeps them equal)."""

    method: str | None = None
    head_fusion: str = "mean"
    residual_weight: float = 1.0
    discard_ratio: float = 0.0
    start_layer: int = 0
    end_layer: int | None = None
    keep_heads: bool = False
    capture: str = "auto"
    full_matrix: bool = False  # compute the whole final matrix even where it is costly (flow: n² max flows)

    @property
    def layers(self) -> int:
        if self.end_layer is None:
            raise ValueError("end_layer is not resolved yet (explain resolves it against the model)")
        return self.end_layer - self.start_layer

    def kwargs(self) -> dict[str, Any]:
        """The options as keyword arguments of `explain_text`, `explain_image` and the faithfulness evaluation."""
        return dataclasses.asdict(self)


def with_overrides(options: Options | None, overrides: dict[str, Any]) -> Options:
    """`options` (default `Options()`) with the named fields replaced; `InputError` naming an unknown one."""
    unknown = sorted(set(overrides) - {f.name for f in dataclasses.fields(Options)})
    if unknown:
        raise InputError(f"unknown option {unknown[0]!r}; the options are: "
                         + ", ".join(o.name for o in OPTIONS))
    if options is not None and not isinstance(options, Options):
        raise InputError(f"options must be an Options, not {type(options).__name__}")
    return dataclasses.replace(options or Options(), **overrides)


def validate(options: Options, layers: int | None = None, first_layer: int = 0) -> Options:
    """Every field checked against its declaration, in table order (the first bad one is named). With the model's
    `layers`, the layer range is resolved: start_layer raised to `first_layer` (the lowest layer the method reads),
    end_layer a number above it. Without (the CLI before loading the model), layers are checked for type only."""
    values = {o.name: o.check(getattr(options, o.name)) for o in OPTIONS if o.field}
    if layers is not None:
        start = max(SPECS["start_layer"].resolve_layer(values["start_layer"], layers), first_layer)
        end = SPECS["end_layer"].resolve_layer(values["end_layer"], layers)
        if end <= start:
            raise InputError(f"end_layer ({end}) must be greater than start_layer ({start}); "
                             f"the model has {layers} layers")
        values.update(start_layer=start, end_layer=end)
    return Options(**values)


def markdown() -> str:
    """docs/OPTIONS.md: every explain option with its values, default, where it applies, flag and URL key."""
    lines = ["# Explain options", "",
             "The options of `rollout_core.explain` (and `explain_text` / `explain_texts` / `explain_image`), the "
             "command line's `text` / `image` flags and the dashboard's sidebar. Generated from "
             "`rollout_core/options.py` (`python -m rollout_core.options > docs/OPTIONS.md`); a test keeps it "
             "current. The flags, the widgets and the checks are built from the same table, so a value outside a "
             "range is refused alike: `InputError` from the API, one line and exit status 2 from the CLI, and the "
             "sidebar offers no such value.", "",
             "| option | values | default | applies to | CLI flag | URL key |", "|---|---|---|---|---|---|"]
    for o in OPTIONS:
        where = "; ".join(filter(None, [o.applies, "text inputs" if o.commands == ("text",) else ""])) or "—"
        default = "the model's measured best" if o.kind == "method" else (
            "the model's" if o.kind == "layer" and o.default is None else f"`{o.default}`")
        lines.append(f"| `{o.name}` | {o.allowed()} | {default} | {where} | "
                     f"{f'`{o.flag}`' if o.flag else '—'} | {f'`{o.url}`' if o.url else '—'} |")
    lines += ["", "What each does:", ""]
    lines += [f"- `{o.name}`: {o.help}." for o in OPTIONS]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    print(markdown(), end="")
