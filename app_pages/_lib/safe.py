"""The one escaping helper for text shown through Streamlit's Markdown (errors, warnings, captions, metric labels,
spinners, st.markdown): user- and URL-derived strings go through `safe_text` so links, images, maths and markup in
them render as the literal characters."""
from __future__ import annotations

import re

_ACTIVE = re.compile(r"([\\`*\[\]()<>!$|~])")
_AUTOLINK = re.compile(r"(?i)(://|www\.|@)")
ZERO_WIDTH = "\u200b"
"""Before the last character of `://`, `www.`, `@`: the browser's Markdown links bare addresses after it has
resolved backslash escapes (remark's GFM autolinks run on the parsed text), so escapes alone do not stop it."""


def _escaped(chars: str) -> str:
    return "".join("\\" + c if c in ":/.@" else c for c in chars)


def safe_text(value: object) -> str:
    """`value` as text that renders inert through Streamlit Markdown.

    Backslash-escapes link, image, maths, code, table and HTML syntax (`[x](http://..)`, `![](..)`, `$$X$$`);
    breaks bare `http://`, `www.` and e-mail addresses with a zero-width space so they are not auto-linked;
    newlines become spaces (no headings or lists from a second line). Underscores are kept (setting names read
    as written)."""
    text = " ".join(str(value).splitlines())
    text = _ACTIVE.sub(r"\\\1", text)
    text = _AUTOLINK.sub(lambda m: _escaped(m.group(1)[:-1]) + ZERO_WIDTH + _escaped(m.group(1)[-1]), text)
    return "\\" + text if text.startswith(("#", "-", "+", "=", ">")) else text
