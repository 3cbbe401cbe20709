"""The build backend: setuptools', with plotly.js copied into static/ before a wheel is built, so the wheel ships it
for the dashboard (Streamlit serves static/ beside app.py; an installed dashboard then never has to write the
copy into site-packages itself, as a checkout does on its first page, app_pages/_lib/layer_explorer.py)."""
from __future__ import annotations

import shutil
from pathlib import Path

from setuptools import build_meta as _setuptools
from setuptools.build_meta import *  # noqa: F403  (every other hook as setuptools defines it)


def _copy_plotly_js() -> None:
    import plotly

    target = Path("static") / "plotly.min.js"  # build hooks run in the source tree
    target.parent.mkdir(exist_ok=True)
    shutil.copyfile(Path(plotly.__file__).parent / "package_data" / "plotly.min.js", target)


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):  # noqa: D103 (PEP 517 hook)
    _copy_plotly_js()
    return _setuptools.build_wheel(wheel_directory, config_settings, metadata_directory)
