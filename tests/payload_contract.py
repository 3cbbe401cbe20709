"""A checker of JSON values against the explorer's TypedDicts (rollout_core/figures/explorer_payload.py), walking
their annotations: exactly the declared keys, each value of its declared type."""
from __future__ import annotations

import types
import typing
from typing import Any


def contract_errors(value: Any, hint: Any, path: str = "data") -> list[str]:
    """Where `value` breaks `hint` (a TypedDict, list[...], Union, Any, str, int, float or bool); [] when it fits."""
    if hint is Any:
        return []
    if typing.is_typeddict(hint):
        if not isinstance(value, dict):
            return [f"{path}: {type(value).__name__}, not a {hint.__name__}"]
        fields = typing.get_type_hints(hint)
        errors = [f"{path}: keys {sorted(value)} are not {sorted(fields)}"] if set(value) != set(fields) else []
        for name, field in fields.items():
            if name in value:
                errors += contract_errors(value[name], field, f"{path}.{name}")
        return errors
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        options = [contract_errors(value, option, path) for option in args]
        return [] if any(not e for e in options) else [f"{path}: fits none of {args}: {options}"]
    if origin is list:
        if not isinstance(value, list):
            return [f"{path}: {type(value).__name__}, not a list"]
        return [e for i, item in enumerate(value) for e in contract_errors(item, args[0], f"{path}[{i}]")]
    if origin is dict:
        return [] if isinstance(value, dict) else [f"{path}: {type(value).__name__}, not a dict"]
    if hint is float:
        fits = isinstance(value, (int, float)) and not isinstance(value, bool)
    elif hint is int:
        fits = isinstance(value, int) and not isinstance(value, bool)
    elif hint in (str, bool):
        fits = isinstance(value, hint)
    elif hint is type(None):
        fits = value is None
    else:
        raise TypeError(f"{path}: the checker does not know {hint!r}")
    return [] if fits else [f"{path}: {value!r} is not a {hint.__name__}"]
