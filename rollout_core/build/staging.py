"""Publishing a built model folder: fill a staging folder beside the target, then swap it in.

A build that fails half way leaves the previous folder (or nothing) in place, never a broken one.
"""
from __future__ import annotations

import shutil
import tempfile
from pathlib import Path
from typing import Callable


def make_readable(folder: Path) -> None:
    """mkdtemp and safetensors create private files; a built model is shared by every user of the machine."""
    folder.chmod(0o755)
    for path in folder.iterdir():
        path.chmod(0o644)


def publish(folder: Path, fill: Callable[[Path], None]) -> None:
    """Run `fill(staging)` on an empty folder next to `folder`, then replace `folder` with it."""
    folder.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=folder.parent, prefix=f".{folder.name}-") as tmp:
        staging = Path(tmp) / folder.name
        staging.mkdir()
        fill(staging)
        make_readable(staging)
        if folder.exists():
            shutil.rmtree(folder)
        staging.rename(folder)
