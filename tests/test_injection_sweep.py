"""Issue 16, item 6: a stranger's link puts Markdown into target, model, labels or text; every element Streamlit
renders as Markdown (errors, warnings, infos, captions, metric label/value/delta, markdown, spinner text) shows
it as literal characters: no link, image, maths or inline HTML can be formed from it."""
from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Callable

import pytest
from page_views import page
from streamlit.testing.v1 import AppTest

from app_pages._lib import core

PAYLOADS = ["[Session expired - click to re-login](http://evil.example/login)", "![](http://evil.example/pixel.png)",
            "$$\\huge X$$"]
LIVE = [r"(?<!\\)\[Session", r"(?<!\\)!\\?\[", r"(?<!\\)\$\$", r"://", r"(?<!\\)\]\\?\(http"]
"""What a working link, image or maths block needs, unescaped: any of these in a rendered value is a failure."""
KINDS = ("error", "warning", "info", "success", "caption", "markdown", "subheader", "title", "header", "toast")


def rendered(at: AppTest) -> list[str]:
    """Every Markdown-rendered string of the page and its sidebar (metrics: label, value and delta)."""
    values = [str(e.value) for kind in KINDS for e in at.get(kind)]
    for metric in at.get("metric"):
        values += [str(metric.label), str(metric.value), str(metric.delta)]
    return values


def assert_neutralised(at: AppTest, payload: str) -> None:
    assert not at.exception, [e.value for e in at.exception]
    shown = [v for v in rendered(at) if "evil" in v or "huge" in v]
    for value in shown:
        for live in LIVE:
            assert not re.search(live, value), (live, value)
    return None


@pytest.mark.slow
@pytest.mark.parametrize("payload", PAYLOADS)
def test_target_model_labels_and_text_from_a_link(payload: str, tiny_model_dir: Callable[[str], Path]) -> None:
    bert, sentence = str(tiny_model_dir("bert")), str(tiny_model_dir("sentence"))
    cases = [
        ("app_pages/text.py", dict(model=bert, text="a good film", method="gradient", target=payload)),
        ("app_pages/text.py", dict(model=payload)),
        ("app_pages/text.py", dict(model=sentence, text="a good film", labels=f"{payload}, other")),
        ("app_pages/text.py", dict(model=bert, text=(payload + " ") * 100)),
        ("app_pages/image.py", dict(model=payload)),
        ("app_pages/image.py", dict(model=str(tiny_model_dir("vit")), method="gradient", target=payload)),
        ("app_pages/compare.py", dict(model=bert, text=payload, b_target=payload, b_method="gradient")),
        ("app_pages/compare.py", dict(model=payload, mode="models", model_b=payload)),
        ("app_pages/evaluate.py", dict(model=payload)),
    ]
    seen = 0
    for path, query in cases:
        at = page(path, **query)
        assert_neutralised(at, payload)
        seen += sum("evil" in v or "huge" in v for v in rendered(at))
    assert seen >= 5, "the payloads reached the rendered elements (else this test proves nothing)"


def test_the_zero_shot_label_in_the_prediction_metric_is_escaped(tiny_model_dir: Callable[[str], Path]) -> None:
    payload = PAYLOADS[1]
    at = page("app_pages/text.py", model=str(tiny_model_dir("sentence")), text="a good film",
              labels=f"{payload}, {payload} b")
    assert_neutralised(at, payload)
    assert at.get("metric") and "evil" in at.get("metric")[0].value


def test_spinner_text_is_escaped(monkeypatch: pytest.MonkeyPatch) -> None:
    spoken: list[str] = []

    class Spinner:
        def __init__(self, text: str) -> None:
            spoken.append(text)

        def __enter__(self) -> "Spinner":
            return self

        def __exit__(self, *exc: Any) -> None:
            return None

    monkeypatch.setattr(core.st, "spinner", Spinner)
    assert core.run(f"loading {PAYLOADS[0]} {PAYLOADS[1]} {PAYLOADS[2]}", lambda: 7) == 7
    assert len(spoken) == 1 and "evil" in spoken[0]
    for live in LIVE:
        assert not re.search(live, spoken[0]), (live, spoken[0])
