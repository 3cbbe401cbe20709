"""The dashboard's home page lists every page (with a link) and every registered method from the registry, each with
one line on when to use it."""
from __future__ import annotations

from pathlib import Path

from streamlit.testing.v1 import AppTest

from rollout_core import methods

APP = str(Path(__file__).resolve().parents[1] / "app.py")


def test_home_lists_every_page_and_every_registered_method():
    at = AppTest.from_file(APP, default_timeout=60).run()
    assert not at.exception
    text = "\n".join(m.value for m in at.markdown)
    pages = Path(APP).parent / "app_pages"
    for script in sorted(pages.glob("*.py")):  # every page script is on the home page
        title = script.stem.capitalize()
        assert any(getattr(link, "label", None) == title for link in at.get("page_link")), title
    table = [line for line in text.splitlines() if line.startswith("| **")]
    assert len(table) == len(methods.names())
    for spec, line in zip(methods.all_methods(), table):  # in the registry's order
        assert f"**{spec.title}** (`{spec.name}`)" in line and spec.use_when and spec.use_when in line
