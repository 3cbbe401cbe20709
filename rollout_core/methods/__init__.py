"""The method registry: every module in this package that defines `METHOD` is a method.

`names()` lists them in display order (`ORDER`, then any other module by name), `get(name)` returns a spec (a
clear error for an unknown name), `runnable(handle)` the ones that can run on a model, `check(name, handle)` the
spec or the reason it cannot run, `compute(spec, input)` runs one, `table()` the method table of the README and
the home page. Adding a method = adding one module here (and its maths and test); nothing else lists method names.
Importing the registry does not import torch (method modules import their maths inside `compute`).
"""
from __future__ import annotations

import functools
import importlib
import pkgutil
from typing import TYPE_CHECKING, Any

from rollout_core.errors import InputError
from rollout_core.methods._spec import MethodInput, MethodOutput, MethodSpec, RolledOut

if TYPE_CHECKING:
    from rollout_core.models.handle import ModelHandle

__all__ = ["ORDER", "MethodInput", "MethodOutput", "MethodSpec", "RolledOut", "all_methods", "check", "compute",
           "describe", "display_name", "get", "names", "runnable", "table", "table_markdown"]

ORDER = ("rollout", "flow", "gradient", "attention", "norm", "alti", "alti_tuned", "attnlrp", "knockout_shapley",
         "value_zeroing", "sink_free", "grad_x_input", "integrated_gradients")
"""The display order of pickers, tables and `--method` choices; a module not listed here follows, by name."""


@functools.lru_cache(maxsize=1)
def all_methods() -> tuple[MethodSpec, ...]:
    """Every registered method, in display order."""
    specs = []
    for info in pkgutil.iter_modules(__path__):
        if info.name.startswith("_"):
            continue
        module = importlib.import_module(f"{__name__}.{info.name}")
        spec = getattr(module, "METHOD", None)
        if isinstance(spec, MethodSpec):
            specs.append(spec)
    rank = {name: i for i, name in enumerate(ORDER)}
    return tuple(sorted(specs, key=lambda s: (rank.get(s.name, len(ORDER)), s.name)))


def names() -> tuple[str, ...]:
    """The method ids, in display order."""
    return tuple(s.name for s in all_methods())


def get(name: str) -> MethodSpec:
    """The spec of `name`; InputError naming the choices for anything else."""
    for spec in all_methods():
        if spec.name == name:
            return spec
    raise InputError(f"unknown method {name!r}; choose one of: {', '.join(names())}")


def display_name(name: str) -> str:
    """What users read for a method id ("ALTI rollout (fine-tuned blocks)" for alti_tuned); an id this version
    does not know (an old saved file) as it is."""
    return next((s.title for s in all_methods() if s.name == name), name)


def describe(name: str, settings: dict[str, Any]) -> str:
    """The facts line of an explanation made with method `name` from its settings ("" when the method has none
    to say, or this version does not know it)."""
    spec = next((s for s in all_methods() if s.name == name), None)
    return "" if spec is None else spec.describe(settings)


def runnable(handle: "ModelHandle", *, capture: str = "auto", zero_shot: bool = False) -> tuple[MethodSpec, ...]:
    """The methods that can run on `handle` with `capture` (`MethodSpec.refusal` is None), in display order:
    what the pickers and the CLI offer."""
    return tuple(s for s in all_methods() if s.refusal(handle, capture=capture, zero_shot=zero_shot) is None)


def check(name: str, handle: "ModelHandle", *, capture: str = "auto", zero_shot: bool = False) -> MethodSpec:
    """The spec of `name` when it can run on `handle`; else its refusal (a RolloutError), naming the methods that
    can. Called before any forward pass."""
    spec = get(name)
    refusal = spec.refusal(handle, capture=capture, zero_shot=zero_shot)
    if refusal is None:
        return spec
    others = [s.name for s in runnable(handle, capture=capture, zero_shot=zero_shot)]
    raise type(refusal)(f"{refusal}; choose " + (f"one of: {', '.join(others)}" if others else "another model"))


def compute(spec: MethodSpec, method_input: MethodInput) -> MethodOutput:
    """Run `spec` on one batch's capture."""
    if spec.compute is None:
        raise InputError(f"method {spec.name!r} declares no compute function")
    return spec.compute(method_input)


MEASURED_FIGURES = ("pointing_game", "deletion_auc")


def table(models: tuple[str, ...] | None = None) -> list[dict[str, Any]]:
    """The method table, one row per method in display order: name, title (display name), explains,
    class_specific, signed, whole_model, modalities, and `measured`: {model: {pointing_game, deletion_auc}} from
    each model's faithfulness record (`models.measured`; None where a model has no figure for the method).
    `models`: the records to read (default: the embedded default models)."""
    from rollout_core.models import measured
    from rollout_core.models.registry import DEFAULTS

    chosen = tuple(DEFAULTS.values()) if models is None else models
    records = {m: (measured.figures(m) or {}).get("methods", {}) for m in chosen}
    rows = []
    for s in all_methods():
        figures = {m: ({k: records[m][s.name].get(k) for k in MEASURED_FIGURES}
                       if isinstance(records[m].get(s.name), dict) else None) for m in chosen}
        rows.append({"name": s.name, "title": s.title, "explains": s.explains, "class_specific": s.class_specific,
                     "signed": s.signed, "whole_model": s.whole_model, "modalities": s.modalities,
                     "measured": figures})
    return rows


def table_markdown(models: tuple[str, ...] | None = None) -> str:
    """`table()` as a markdown table (pointing game ↑ / deletion AUC ↓ per model, "–" where not measured)."""
    rows = table(models)
    chosen = list(rows[0]["measured"]) if rows else []
    head = ["method", "id", "explains", "class-specific", "inputs", *(f"{m} pointing ↑ / deletion ↓" for m in chosen)]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        cells = [r["title"], f"`{r['name']}`", r["explains"], "yes" if r["class_specific"] else "no",
                 ", ".join(r["modalities"])]
        for m in chosen:
            f = r["measured"][m]
            cells.append("–" if f is None else " / ".join("–" if f[k] is None else f"{f[k]:.2f}"
                                                         for k in MEASURED_FIGURES))
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"
