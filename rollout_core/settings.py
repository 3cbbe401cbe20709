"""Server settings: the ROLLOUT_* environment variables, declared once in `SETTINGS` (name, kind, default, bounds,
help) and read through it.

Readers ask by name (`number("ROLLOUT_MAX_HEAVY_JOBS")`, `folder("ROLLOUT_MODELS_DIR")`) when they need the value,
so a change of the environment is seen at the next read; `check_settings` parses every entry at once, so the app
and the CLI refuse a bad value at start-up with one message naming the variable and the value instead of failing
deep inside a page. docs/SETTINGS.md is `markdown()` of the table (`python -m rollout_core.settings`; tested).
Stdlib only: every layer may read a setting.
"""
from __future__ import annotations

import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from rollout_core.errors import RolloutError

Kind = Literal["integer", "number", "folder", "folders", "path", "switch"]


class SettingsError(RolloutError):
    """A ROLLOUT_* environment variable holds a value that cannot be used."""


@dataclass(frozen=True)
class Setting:
    """One environment variable. Numbers: `default` and the bound `minimum` (excluded when `above`); folders and
    paths: `default` says in words where they are when unset."""

    name: str
    kind: Kind
    default: float | str
    help: str
    minimum: float | None = None
    above: bool = False
    unit: str = ""

    def bound(self) -> str:
        """The allowed values in words ("" when any value goes)."""
        if self.minimum is None:
            return {"folder": "a folder", "folders": f"existing folders separated by `{os.pathsep}`",
                    "switch": "`on` or `off`"}.get(self.kind, "")
        kind = "a whole number" if self.kind == "integer" else "a number"
        return f"{kind} {'above' if self.above else 'at least'} {self.minimum:g}"


SETTINGS: tuple[Setting, ...] = (
    Setting("ROLLOUT_ALLOWED_MODEL_ROOTS", "folders", "any folder",
            "Folders that local model folders must lie under; files symlinked from outside are refused too. Unset or "
            "empty: any folder (fine on a personal machine; set it on a shared server). Registry models and hub "
            "downloads are not affected. A root that does not exist stops the start."),
    Setting("ROLLOUT_MAX_MODEL_PARAMS", "integer", 2_000_000_000,
            "The largest parameter count a model's config may declare (e.g. `2e9`); a larger model is refused from "
            "its config, before any weights are read.", minimum=1),
    Setting("ROLLOUT_MAX_IMAGE_PIXELS", "integer", 40_000_000,
            "Images declaring more pixels are refused from the header, before decoding (decompression bombs); 16-bit "
            "pixels count twice; `40e6` works too. Only PNG, JPEG, WebP, BMP and GIF (first frame) are decoded, "
            "whatever the file name. Images whose long side is over 100x the short side are always refused; very "
            "large legal photos are downscaled.", minimum=1),
    Setting("ROLLOUT_MODEL_CACHE_SIZE", "integer", 3,
            "Loaded models kept in memory (least recently used goes first); two sessions asking for the same model at "
            "once load it once.", minimum=1),
    Setting("ROLLOUT_MEMORY_BUDGET_MB", "number", 2048,
            "Above this estimated attention memory, the low-memory capture (heads fused and rollout multiplied inside "
            "the forward pass) is used. When even that path's n x n matrix would exceed it (four float32 n x n "
            "matrices: above about 11.6k tokens at the default), the capture computes the explained rows only: each "
            "layer's rollout step goes to a temporary file (`ROLLOUT_SPILL_DIR`) by blocks of query rows (float32 "
            "when that takes at most half the free disk, else float16: 2 GiB per layer at 32k tokens), the rows of "
            "every layer are computed from the top layer down after the forward, and the files are deleted. The "
            "explanation then has no matrix, and its settings say so (`lowmem_mode`, `spill_dtype`, `spill_mib`, "
            "`matrix_note`); discard ratio 0 only.", minimum=0, above=True, unit="MB"),
    Setting("ROLLOUT_SPILL_DIR", "folder", "the system's temporary folder",
            "Where the low-memory capture's layer files go."),
    Setting("ROLLOUT_MODELS_DIR", "folder", "`$XDG_CACHE_HOME/rollout-dashboard/models` (`~/.cache/...`)",
            "Where `python -m rollout_core setup` builds the embedded models and where they are loaded from."),
    Setting("ROLLOUT_CORPUS_DIR", "folder", "`$XDG_CACHE_HOME/rollout-dashboard/corpus` (`~/.cache/...`)",
            "The folder whose result folders the Corpus page may open (only folders directly inside it: a visitor "
            "cannot make the server read a typed path); write `rollout corpus --out` there to open a run."),
    Setting("ROLLOUT_RESULT_CACHE_MB", "number", 2048,
            "The app's explanations, layer-view payloads and evaluations share one cache of this many megabytes, "
            "least recently used out first (one 512-token explanation with every head is about 158 MB, a sentence a "
            "few KB).", minimum=0, above=True, unit="MB"),
    Setting("ROLLOUT_MAX_COMPUTE_SECONDS", "number", 60,
            "In the app, a request estimated above this is refused up front with the estimate and a cheaper choice. "
            "Every method is estimated by its own cost model (`MethodSpec.seconds` on the request's tokens or "
            "patches, layers, heads and hidden size; `rollout_core.serving.budget.check_request`): on default-text "
            "(6 layers) rollout takes well under a second at 256 tokens, flow about 4 s, value zeroing about a "
            "minute, knockout Shapley about 5 min; the Corpus page sums the rows' estimates "
            "(`benchmarks/bench_method_costs.py`; estimate and measured side by side in "
            "`benchmarks/RESULTS.md`).", minimum=0, above=True, unit="s"),
    Setting("ROLLOUT_MAX_HEAVY_JOBS", "integer", 2,
            "Long computations (estimated 2 s or more, evaluations) running at once across all sessions; the next "
            "one waits up to 30 s with a note, then is refused. A flow whose page is closed, rerun or stopped ends "
            "at its next max-flow problem.", minimum=1),
    Setting("ROLLOUT_SERVER", "switch", "on",
            "`off`: the CLI never hands a command to a running warm server (`python -m rollout_core serve`)."),
    Setting("ROLLOUT_SERVER_DIR", "path", "`$XDG_RUNTIME_DIR/rollout_core`, else `/tmp/rollout_core-<uid>`",
            "The folder that holds the warm server's socket; it must be a real folder of this user that nobody else "
            "can open."),
)
_BY_NAME = {setting.name: setting for setting in SETTINGS}


def _raw(name: str) -> str:
    return os.environ.get(name, "").strip()


def _entry(name: str) -> Setting:
    try:
        return _BY_NAME[name]
    except KeyError:
        raise KeyError(f"{name} is not declared in rollout_core.settings.SETTINGS") from None


def parse_number(setting: Setting) -> float | int:
    """`setting`'s number from the environment (unset or blank: its default), e.g. "2e9", "40_000_000", "0.5";
    `SettingsError` naming the variable and its value when it is not a finite number within the bound, or not
    whole for an integer setting."""
    raw = _raw(setting.name)
    integer = setting.kind == "integer"
    if not raw:
        return int(setting.default) if integer else float(setting.default)
    try:
        value = float(raw)
    except ValueError:
        value = math.nan
    low = -math.inf if setting.minimum is None else setting.minimum
    if not math.isfinite(value) or (integer and value != int(value)) or value < low \
            or (setting.above and value == low):
        raise SettingsError(f"server setting {setting.name}={raw!r} is not a valid value: expected "
                            f"{setting.bound()} (e.g. {setting.default:g}); fix or unset it and restart")
    return int(value) if integer else value


def number(name: str) -> float | int:
    """The number in the declared setting `name` (an int for integer settings); see `parse_number`."""
    return parse_number(_entry(name))


def folder(name: str) -> Path | None:
    """The folder in the declared setting `name`, or None when unset; `SettingsError` when it names an existing
    non-folder."""
    _entry(name)
    raw = _raw(name)
    if not raw:
        return None
    path = Path(raw).expanduser()
    if path.exists() and not path.is_dir():
        raise SettingsError(f"server setting {name}={raw!r} is not a folder; fix or unset it and restart")
    return path


def folders(name: str) -> list[Path]:
    """The os.pathsep-separated folders in the declared setting `name` ([] when unset); `SettingsError` naming the
    first one that does not exist or is not a folder (a root that cannot hold models is a typo, not a
    restriction)."""
    _entry(name)
    found = []
    for raw in os.environ.get(name, "").split(os.pathsep):
        if not raw.strip():
            continue
        path = Path(raw.strip()).expanduser()
        if not path.is_dir():
            problem = "is not a folder" if path.exists() else "does not exist"
            raise SettingsError(f"server setting {name}: {raw.strip()!r} {problem}; fix or unset it and restart")
        found.append(path)
    return found


def text(name: str) -> str:
    """The declared setting `name` as written (stripped; "" when unset), for readers that parse it leniently."""
    _entry(name)
    return _raw(name)


def switch(name: str) -> bool:
    """The declared on/off setting `name`: False only for "off" (any case); unset means its default."""
    raw = _raw(name).lower() or str(_entry(name).default)
    return raw != "off"


def _check(setting: Setting) -> None:
    if setting.kind in ("integer", "number"):
        parse_number(setting)
    elif setting.kind == "folder":
        folder(setting.name)
    elif setting.kind == "folders":
        folders(setting.name)
    elif setting.kind == "switch" and _raw(setting.name).lower() not in ("", "on", "off"):
        raise SettingsError(f"server setting {setting.name}={_raw(setting.name)!r} is not a valid value: expected "
                            f"{setting.bound()}; fix or unset it and restart")


def check_settings() -> None:
    """Parse every declared setting; raise one `SettingsError` listing each bad one."""
    problems = []
    for setting in SETTINGS:
        try:
            _check(setting)
        except SettingsError as err:
            problems.append(str(err))
    if problems:
        raise SettingsError("; ".join(problems))


def markdown() -> str:
    """docs/SETTINGS.md: every setting with its default, allowed values and help."""
    lines = ["# Server settings", "",
             "Environment variables read by the app, the CLI and the library. Generated from "
             "`rollout_core/settings.py` (`python -m rollout_core.settings > docs/SETTINGS.md`); a test keeps it "
             "current. Every value is checked when the app or the CLI starts: a bad one (`nan`, `0`, `lots`, a file "
             "where a folder belongs) stops it with one message naming the variable and the value (CLI exit "
             "status 2). The upload size limit is Streamlit's `server.maxUploadSize` in `.streamlit/config.toml` "
             "(20 MB).", ""]
    for setting in SETTINGS:
        default = setting.default if isinstance(setting.default, str) else f"{setting.default:_}"
        unit = f" {setting.unit}" if setting.unit and isinstance(setting.default, (int, float)) else ""
        bound = setting.bound()
        lines += [f"## `{setting.name}`", "",
                  f"Default: {default}{unit}." + (f" Allowed: {bound}." if bound else ""), "", setting.help, ""]
    return "\n".join(lines)


if __name__ == "__main__":
    print(markdown(), end="")
