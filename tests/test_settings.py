"""Every ROLLOUT_* setting is declared once (`rollout_core.settings.SETTINGS`) and parsed through it; a bad value is
one message naming the variable and the value, at start-up of the CLI (exit 2) and of the app (an error box, no
traceback), not deep inside a page (issue 16); docs/SETTINGS.md is the table's (issue 24)."""
from __future__ import annotations

import io
import re
from pathlib import Path

import pytest
from PIL import Image
from streamlit.testing.v1 import AppTest

from rollout_core import cli, lowmem, settings
from rollout_core.errors import SecurityError
from rollout_core.inputs import images
from rollout_core.models import loading, size
from rollout_core.settings import Setting, SettingsError, check_settings, parse_number

ROOT = Path(__file__).resolve().parents[1]
APP = str(ROOT / "app.py")

BAD = [  # (variable, bad value) - the cases of the issue first
    ("ROLLOUT_MAX_IMAGE_PIXELS", "lots"), ("ROLLOUT_MAX_IMAGE_PIXELS", "0"), ("ROLLOUT_MAX_IMAGE_PIXELS", "1.5"),
    ("ROLLOUT_MEMORY_BUDGET_MB", "nan"), ("ROLLOUT_MEMORY_BUDGET_MB", "0"), ("ROLLOUT_MEMORY_BUDGET_MB", "-5"),
    ("ROLLOUT_MEMORY_BUDGET_MB", "inf"), ("ROLLOUT_MAX_MODEL_PARAMS", "2 billion"), ("ROLLOUT_MAX_MODEL_PARAMS", "-1"),
    ("ROLLOUT_MODEL_CACHE_SIZE", "three"), ("ROLLOUT_MODEL_CACHE_SIZE", "0"),
]
READERS = {"ROLLOUT_MAX_IMAGE_PIXELS": images.max_image_pixels, "ROLLOUT_MEMORY_BUDGET_MB": lowmem.memory_budget_bytes,
           "ROLLOUT_MAX_MODEL_PARAMS": size.max_params, "ROLLOUT_MODEL_CACHE_SIZE": loading.cache_size}


@pytest.mark.parametrize("name,raw", BAD)
def test_a_bad_value_is_refused_where_read_and_at_start_up(name: str, raw: str, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv(name, raw)
    with pytest.raises(SettingsError, match=f"{name}={raw!r}"):
        READERS[name]()
    with pytest.raises(SettingsError, match=f"{name}={raw!r}"):
        check_settings()


@pytest.mark.parametrize("name,raw,expected", [
    ("ROLLOUT_MAX_IMAGE_PIXELS", "40e6", 40_000_000), ("ROLLOUT_MAX_IMAGE_PIXELS", " 1_000 ", 1000),
    ("ROLLOUT_MEMORY_BUDGET_MB", "0.5", 2**19), ("ROLLOUT_MAX_MODEL_PARAMS", "2e9", 2_000_000_000),
    ("ROLLOUT_MODEL_CACHE_SIZE", "5", 5), ("ROLLOUT_MODEL_CACHE_SIZE", "", 3),
])
def test_good_values_are_read_as_numbers(name: str, raw: str, expected: int, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv(name, raw)
    assert READERS[name]() == expected
    check_settings()


def test_the_image_budget_is_read_when_decoding_not_at_import(monkeypatch: pytest.MonkeyPatch):
    buffer = io.BytesIO()
    Image.new("RGB", (10, 10)).save(buffer, "PNG")
    monkeypatch.setenv("ROLLOUT_MAX_IMAGE_PIXELS", "99")
    with pytest.raises(SecurityError, match="above the limit of 99 pixels"):
        images.load_image(buffer.getvalue())


def test_every_bad_setting_is_listed_in_one_message(monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    (tmp_path / "file").write_text("x")
    monkeypatch.setenv("ROLLOUT_MAX_IMAGE_PIXELS", "lots")
    monkeypatch.setenv("ROLLOUT_MEMORY_BUDGET_MB", "nan")
    monkeypatch.setenv("ROLLOUT_MODELS_DIR", str(tmp_path / "file"))
    with pytest.raises(SettingsError) as err:
        check_settings()
    message = str(err.value)
    assert "ROLLOUT_MAX_IMAGE_PIXELS='lots'" in message and "ROLLOUT_MEMORY_BUDGET_MB='nan'" in message
    assert "ROLLOUT_MODELS_DIR=" in message and "not a folder" in message


def test_number_bounds_by_hand(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("ROLLOUT_TEST_X", "2")
    assert parse_number(Setting("ROLLOUT_TEST_X", "number", 7, "", minimum=2)) == 2.0
    with pytest.raises(SettingsError, match="above 2"):
        parse_number(Setting("ROLLOUT_TEST_X", "number", 7, "", minimum=2, above=True))
    monkeypatch.delenv("ROLLOUT_TEST_X")
    assert parse_number(Setting("ROLLOUT_TEST_X", "integer", 7, "")) == 7


def test_every_setting_the_code_reads_is_declared_and_every_declared_one_is_read():
    """The table is the list: a ROLLOUT_* name in the package or the app that is not declared, or a declared one
    nothing reads, fails here."""
    declared = {s.name for s in settings.SETTINGS}
    used = set()
    for path in [*(ROOT / "rollout_core").rglob("*.py"), *(ROOT / "app_pages").rglob("*.py"), ROOT / "app.py"]:
        if path.name != "settings.py":
            used |= set(re.findall(r"ROLLOUT_[A-Z_]*[A-Z]", path.read_text(encoding="utf-8")))
    assert used - declared == set()
    assert declared - used == set()


def test_an_undeclared_setting_cannot_be_read():
    with pytest.raises(KeyError, match="ROLLOUT_NOPE is not declared"):
        settings.number("ROLLOUT_NOPE")


def test_docs_settings_is_generated_from_the_table():
    """docs/SETTINGS.md is `python -m rollout_core.settings > docs/SETTINGS.md`; regenerate it after a change."""
    assert (ROOT / "docs" / "SETTINGS.md").read_text(encoding="utf-8") == settings.markdown()
    for setting in settings.SETTINGS:
        assert f"## `{setting.name}`" in settings.markdown()


def test_the_on_off_switch(monkeypatch: pytest.MonkeyPatch):
    for raw, on in (("", True), ("on", True), ("OFF", False), (" off ", False)):
        monkeypatch.setenv("ROLLOUT_SERVER", raw)
        assert settings.switch("ROLLOUT_SERVER") is on
        check_settings()
    monkeypatch.setenv("ROLLOUT_SERVER", "offf")
    with pytest.raises(SettingsError, match="ROLLOUT_SERVER='offf' is not a valid value: expected `on` or `off`"):
        check_settings()


def test_cli_refuses_a_bad_setting_at_start_up(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture):
    monkeypatch.setenv("ROLLOUT_MEMORY_BUDGET_MB", "nan")
    with pytest.raises(SystemExit) as stop:
        cli.main(["text", "--model", "no-such-model-needed", "--text", "x"])  # refused before any model is read
    err = capsys.readouterr().err
    assert stop.value.code == 2 and err.count("\n") == 1 and "ROLLOUT_MEMORY_BUDGET_MB='nan'" in err
    assert "Traceback" not in err and "internal" not in err


def test_app_shows_one_error_naming_the_setting(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("ROLLOUT_MAX_IMAGE_PIXELS", "40 million")
    at = AppTest.from_file(APP, default_timeout=60).run()
    assert not at.exception
    assert len(at.error) == 1 and "ROLLOUT\\_MAX\\_IMAGE\\_PIXELS" not in at.error[0].value
    assert "ROLLOUT_MAX_IMAGE_PIXELS='40 million'" in at.error[0].value.replace("\\", "")


def test_allowed_roots_that_do_not_exist_stop_the_start(monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    (tmp_path / "file").write_text("x")
    (tmp_path / "models").mkdir()
    monkeypatch.setenv("ROLLOUT_ALLOWED_MODEL_ROOTS", f"{tmp_path / 'models'}:{tmp_path / 'typo'}")
    with pytest.raises(SettingsError, match=r"ROLLOUT_ALLOWED_MODEL_ROOTS: '.*typo' does not exist"):
        check_settings()
    monkeypatch.setenv("ROLLOUT_ALLOWED_MODEL_ROOTS", f"{tmp_path / 'file'}")
    with pytest.raises(SettingsError, match="is not a folder"):
        check_settings()
    monkeypatch.setenv("ROLLOUT_ALLOWED_MODEL_ROOTS", f"{tmp_path / 'models'}:")
    check_settings()
