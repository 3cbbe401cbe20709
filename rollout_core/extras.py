"""The optional parts of the install (pyproject.toml's extras) and the one-line message when one is missing.

The core install (`pip install .`) is what `explain_*` and the figures need; everything else sits in an extra named
for what it does, and the code that needs it asks for it here, so a missing one reads as one line naming the
`pip install` that adds it (a `RolloutError`: the CLI's one `error:` line and exit status 2, a page's message).
"""
from __future__ import annotations

import importlib
from types import ModuleType

from rollout_core.errors import RolloutError

EXTRAS: dict[str, str] = {
    "app": "the dashboard (Streamlit)",
    "setup": "building the embedded default models (`rollout setup`)",
    "corpus": "explaining a whole corpus into Parquet files",
    "export": "SVG/PDF export of figures",
    "ray": "the Ray engine (corpus and evaluate with --engine ray)",
    "dev": "the test suite",
}
"""Extra -> what it is for (pyproject.toml's [project.optional-dependencies] has exactly these)."""


class MissingExtraError(RolloutError):
    """A Python package of an optional extra is not installed."""


def install_command(extra: str) -> str:
    """The command that adds `extra` to an installed rollout-dashboard (editable or not)."""
    if extra not in EXTRAS:
        raise ValueError(f"unknown extra {extra!r}")
    return f'pip install "rollout-dashboard[{extra}]"'


def missing_message(package: str, extra: str, what: str | None = None) -> str:
    """One line: what needs the package (default: what the extra is for), the package, and the command."""
    return f"{what or EXTRAS[extra]} needs the Python package {package}: {install_command(extra)}"


def require(module: str, extra: str, package: str | None = None, what: str | None = None) -> ModuleType:
    """Import `module`, or raise MissingExtraError naming `package` (default: the module's top name) and `extra`."""
    try:
        return importlib.import_module(module)
    except ImportError as err:
        raise MissingExtraError(missing_message(package or module.split(".")[0], extra, what)) from err
