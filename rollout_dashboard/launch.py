"""Start the dashboard: `streamlit run app.py` with the app's own settings, from an installed package or a checkout.

A wheel ships app.py, app_pages/ and .streamlit/config.toml unmoved as rollout_dashboard/app/ (see
pyproject.toml); in a checkout they are the repository root, one folder up. Streamlit reads config.toml only
from the working directory, so its settings (static file serving for plotly.js, the upload limit) are passed
as command-line options; options given to `rollout-dashboard` come after them and win.
"""
from __future__ import annotations

import os
import sys
import tomllib
from pathlib import Path
from typing import Sequence

HERE = Path(__file__).resolve().parent


def app_dir() -> Path:
    """The folder holding app.py: the installed copy, else the checkout this package sits in."""
    for folder in (HERE / "app", HERE.parent):
        if (folder / "app.py").is_file() and (folder / "app_pages").is_dir():
            return folder
    raise FileNotFoundError(f"the dashboard's app.py is neither in {HERE / 'app'} nor in {HERE.parent}")


def config_options(folder: Path) -> list[str]:
    """The app's .streamlit/config.toml as `--section.key=value` options."""
    path = folder / ".streamlit" / "config.toml"
    if not path.is_file():
        return []
    config = tomllib.loads(path.read_text(encoding="utf-8"))
    return [f"--{section}.{key}={str(value).lower() if isinstance(value, bool) else value}"
            for section, values in config.items() for key, value in values.items()]


def command(argv: Sequence[str]) -> list[str]:
    """The `streamlit run` command line for the app, with `argv` (Streamlit options) appended."""
    folder = app_dir()
    return [sys.executable, "-m", "streamlit", "run", str(folder / "app.py"), *config_options(folder), *argv]


def main(argv: Sequence[str] | None = None) -> int:
    """Replace this process by Streamlit serving the dashboard (exit status 2 with one line if it cannot)."""
    try:
        args = command(sys.argv[1:] if argv is None else argv)
    except (FileNotFoundError, tomllib.TOMLDecodeError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    from rollout_core.extras import MissingExtraError, require

    try:
        require("streamlit", "app")  # only to say clearly when the [app] extra is missing
    except MissingExtraError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    os.execv(sys.executable, args)
