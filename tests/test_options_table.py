"""One description of the options: the CLI's flags, the sidebar's widgets and explain's checks come from
`rollout_core.options.OPTIONS`, so they agree on names, defaults, choices and ranges, and a value outside a range is
refused alike by the command line (one line, exit 2, before the model loads), the API (InputError naming the option)
and the sidebar (it cannot produce it)."""
from __future__ import annotations

import argparse
import dataclasses
import inspect
from pathlib import Path
from typing import Any, Callable

import numpy as np
import pytest
import streamlit as st
from streamlit.testing.v1 import AppTest

from rollout_core import cli, explain, methods
from rollout_core.errors import InputError
from rollout_core.options import OPTIONS, SPECS, Options, OptionSpec, markdown, validate, with_overrides

APP = str(Path(__file__).resolve().parents[1] / "app.py")
NUMBERS = [o for o in OPTIONS if o.kind == "number"]
CHOICES = [o for o in OPTIONS if o.kind == "choice"]


def _flags(command: str) -> dict[str, argparse.Action]:
    parser = cli.build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices[command]
    return {a.option_strings[0]: a for a in sub._actions if a.option_strings}


def _outside(o: OptionSpec) -> list[float]:
    return [o.low - 0.01, o.high + 0.01, float("inf"), float("nan")]  # type: ignore[operator]


def _cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    try:
        status = cli.main(list(args))
    except SystemExit as stop:
        status = int(stop.code)
    out, err = capsys.readouterr()
    return status, out, err


def test_the_options_doc_is_the_tables() -> None:
    """docs/OPTIONS.md is `python -m rollout_core.options > docs/OPTIONS.md`; regenerate it after a change."""
    assert (Path(__file__).resolve().parents[1] / "docs" / "OPTIONS.md").read_text(encoding="utf-8") == markdown()


def test_options_fields_are_the_tables() -> None:
    fields = {f.name: f.default for f in dataclasses.fields(Options)}
    assert fields == {o.name: o.default for o in OPTIONS if o.field}


@pytest.mark.parametrize("wrapper", [explain.explain_text, explain.explain_texts, explain.explain_image])
def test_the_wrappers_take_the_tables_options_with_its_defaults(wrapper: Callable[..., Any]) -> None:
    parameters = inspect.signature(wrapper).parameters
    for o in OPTIONS:
        if "image" in wrapper.__name__ and "image" not in o.commands:
            assert o.name not in parameters
        else:
            assert parameters[o.name].default == o.default, o.name
    assert set(parameters) - set(SPECS) <= {"model", "text", "texts", "image", "batch_size"}


@pytest.mark.parametrize("command", ["text", "image"])
def test_every_option_with_a_flag_is_on_the_command_line_as_declared(command: str) -> None:
    flags = _flags(command)
    for o in OPTIONS:
        if o.flag is None or command not in o.commands:
            assert o.flag is None or o.flag not in flags
            continue
        action = flags[o.flag]
        assert action.dest == o.name and action.default == o.default and o.help in action.help
        expected = methods.names() if o.kind == "method" else o.choices
        assert (tuple(action.choices) if action.choices else None) == (tuple(expected) if expected else None)


@pytest.mark.parametrize("o", NUMBERS, ids=lambda o: o.name)
def test_a_number_outside_its_range_is_refused_alike_by_the_api_and_the_cli(
        o: OptionSpec, capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    for value in (o.low, o.high, (o.low + o.high) / 2):  # the bounds are inside
        assert getattr(validate(with_overrides(None, {o.name: value})), o.name) == value
    for value in _outside(o):
        with pytest.raises(InputError, match=o.name):
            validate(with_overrides(None, {o.name: value}))
        # before the model loads: the missing folder would be the error otherwise
        status, out, err = _cli(capsys, "text", "--model", str(tmp_path / "missing"), "--text", "hi", o.flag,
                                str(value))
        assert status == 2 and out == "" and err.count("\n") == 1 and err.startswith("error: ") and o.name in err


@pytest.mark.parametrize("o", NUMBERS, ids=lambda o: o.name)
def test_explain_refuses_a_number_outside_its_range(o: OptionSpec, tiny_handle: Callable[[str], Any]) -> None:
    for value in _outside(o):
        with pytest.raises(InputError, match=o.name):
            explain.explain(tiny_handle("bert"), "the cat", **{o.name: value})


@pytest.mark.parametrize("o", CHOICES, ids=lambda o: o.name)
def test_an_unknown_choice_is_refused_alike(o: OptionSpec, capsys: pytest.CaptureFixture[str],
                                            tiny_handle: Callable[[str], Any]) -> None:
    with pytest.raises(InputError, match=o.name.replace("_", " ")):
        explain.explain(tiny_handle("bert"), "the cat", **{o.name: "bogus"})
    status, _, err = _cli(capsys, "text", "--text", "hi", o.flag, "bogus")
    assert status == 2 and err.count("\n") == 1 and "invalid choice" in err


def test_layer_range_is_the_models(tiny_handle: Callable[[str], Any]) -> None:
    handle = tiny_handle("roberta")  # 3 layers
    start, end = SPECS["start_layer"], SPECS["end_layer"]
    assert start.layer_bounds(3) == (0, 2) and end.layer_bounds(3) == (1, 3)
    for o in (start, end):
        low, high = o.layer_bounds(3)
        other = {"end_layer": None} if o is start else {"start_layer": 0}
        for value in (low, high):
            explain.explain(handle, "the cat", **{o.name: value, **other})
        with pytest.raises(InputError, match="out of range"):
            explain.explain(handle, "the cat", **{o.name: high + 1, **other})


@pytest.mark.parametrize("kind", ["bert", "vit"])
def test_a_methods_uses_flags_say_which_options_change_its_result(kind: str,
                                                                 tiny_handle: Callable[[str], Any]) -> None:
    """The sidebar greys out an option the method does not read (`OptionSpec.uses` names the MethodSpec flag): an
    option a method says it ignores leaves its result unchanged, and one it reads changes it."""
    handle = tiny_handle(kind)
    given = "the cat sat on the mat while the dog ran far away" if kind == "bert" else \
        (np.random.default_rng(0).random((40, 56, 3)) * 255).astype(np.uint8)
    other = {"head_fusion": "max", "residual_weight": 0.3, "discard_ratio": 0.9, "start_layer": 1}
    assert {o.name for o in OPTIONS if o.uses} == set(other)
    for spec in methods.runnable(handle):
        base = explain.explain(handle, given, method=spec.name)
        for name, value in other.items():
            changed = explain.explain(handle, given, method=spec.name, **{name: value})
            # a start layer shortens the slider: its final map is what it changes, or not
            differs = not np.allclose(base.scores, changed.scores, atol=1e-9) if name == "start_layer" else \
                not np.allclose(base.layer_scores, changed.layer_scores, atol=1e-9)
            assert differs == getattr(spec, SPECS[name].uses), (spec.name, name)


def test_max_length_is_checked_by_the_table_in_the_api_and_the_cli(capsys: pytest.CaptureFixture[str],
                                                                   tiny_handle: Callable[[str], Any],
                                                                   tmp_path: Path) -> None:
    bert = tiny_handle("bert")
    assert len(explain.explain(bert, "the cat sat on the mat", max_length=4).tokens) == 4
    for value in (1, -3, True, 2.5):
        with pytest.raises(InputError, match="max_length must be an integer"):
            explain.explain(bert, "the cat", max_length=value)
    status, _, err = _cli(capsys, "text", "--model", str(tmp_path / "missing"), "--text", "hi", "--max-length", "1")
    assert status == 2 and err.count("\n") == 1 and "max_length must be an integer of at least 2" in err


def test_an_unknown_option_is_named() -> None:
    with pytest.raises(InputError, match="unknown option 'residual'"):
        with_overrides(None, {"residual": 1.0})


@pytest.fixture()
def text_page(tiny_model_dir: Callable[[str], Path]) -> AppTest:
    st.cache_resource.clear()
    at = AppTest.from_file(APP, default_timeout=120)
    at.query_params["model"] = str(tiny_model_dir("bert"))  # 2 layers
    return at.switch_page("app_pages/text.py").run()


def test_every_sidebar_widget_has_the_tables_range(text_page: AppTest) -> None:
    at = text_page
    assert not at.exception
    drawn = {o.name for o in OPTIONS if o.url is not None}
    assert drawn == {"method", "head_fusion", "residual_weight", "discard_ratio", "start_layer", "target"}
    for o in NUMBERS:
        slider = at.sidebar.slider(key=o.url)
        assert (slider.min, slider.max, slider.value) == (o.low, o.high, o.default)
    for o in CHOICES:
        if o.url is not None:
            assert tuple(at.sidebar.selectbox(key=o.url).options) == o.choices
    layers = at.sidebar.number_input(key=SPECS["start_layer"].url)
    assert (layers.min, layers.max) == SPECS["start_layer"].layer_bounds(2)
    assert at.sidebar.text_input(key=SPECS["target"].url).value == ""
