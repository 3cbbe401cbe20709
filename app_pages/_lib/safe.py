"""The one escaping helper for text shown through Streamlit's Markdown (errors, warnings, captions, metric labels,
spinners, st.markdown): user- and URL-derived strings go through `safe_text` so links, images, maths and markup in
them render as the literal characters."""
from __future__ import annotations

import re

_ACTIVE = re.compile(r"([\\`*\[\]()<>!$|~])")
_AUTOLINK = re.compile(r"(?i)(://|www\.|@)")


def safe_text(value: object) -> str:
    """`value` as text that renders inert through Streamlit Markdown.

    Backslash-escapes link, image, maths, code, table and HTML syntax (`[x](http://..)`, `![](..)`, `$$X$$`);
    breaks bare `http://`, `www.` and e-mail addresses so they are not auto-linked; newlines become spaces
    (no headings or lists from a second line). Underscores are kept (setting names read as written)."""
    text = " ".join(str(value).splitlines())
    text = _ACTIVE.sub(r"\\\1", text)
    text = _AUTOLINK.sub(lambda m: "".join("\\" + c if c in ":/.@" else c for c in m.group(1)), text)
    return "\\" + text if text.startswith(("#", "-", "+", "=", ">")) else text
