"""The method registry: every module in this package that defines `METHOD` is a method.

`names()` lists them in display order, `get(name)` returns a spec (a clear error for an unknown name),
`compute(spec, input)` runs one. Adding a method = adding one module here; nothing else lists method names.
Importing the registry does not import torch (method modules import their maths inside `compute`).
"""
from __future__ import annotations

import functools
import importlib
import pkgutil

from rollout_core.errors import InputError
from rollout_core.methods._spec import MethodInput, MethodOutput, MethodSpec

__all__ = ["MethodInput", "MethodOutput", "MethodSpec", "all_methods", "compute", "get", "names"]


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
    return tuple(sorted(specs, key=lambda s: (s.order, s.name)))


def names() -> tuple[str, ...]:
    """The method ids, in display order."""
    return tuple(s.name for s in all_methods())


def get(name: str) -> MethodSpec:
    """The spec of `name`; InputError naming the choices for anything else."""
    for spec in all_methods():
        if spec.name == name:
            return spec
    raise InputError(f"unknown method {name!r}; choose one of: {', '.join(names())}")


def compute(spec: MethodSpec, method_input: MethodInput) -> MethodOutput:
    """Run `spec` on one batch's capture."""
    if spec.compute is None:
        raise InputError(f"method {spec.name!r} declares no compute function")
    return spec.compute(method_input)
