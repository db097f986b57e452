"""The lake's settings object (pure): each switch as the environment sets it, read again only
after a variable changed, and every switch documented in docs/parameters.md."""

from __future__ import annotations

from pathlib import Path

import pytest

from airflow_provider_binlog.lake import settings
from airflow_provider_binlog.lake.native import file_append, new_keys, position_delta
from airflow_provider_binlog.lake.spark import class_archive, jars, local_fs_jar

DOCS = Path(__file__).resolve().parents[2] / "docs" / "parameters.md"


def test_an_empty_environment_gives_the_defaults() -> None:
    assert settings.from_env({}) == settings.LakeSettings()
    defaults = settings.LakeSettings()
    assert defaults.position_delta and defaults.new_keys and defaults.key_range and defaults.local_fs
    assert defaults.warehouse is None and defaults.position_delta_max_rows is None


@pytest.mark.parametrize("text", ["off", "0", "false", "OFF"])
def test_a_switch_is_off_by_off_0_or_false(text: str) -> None:
    got = settings.from_env({"BINLOG_CDC_POSITION_DELTA": text, "BINLOG_CDC_NEW_KEYS": text})
    assert not got.position_delta and not got.new_keys
    assert got.file_append  # the others untouched


def test_the_texts_and_numbers() -> None:
    got = settings.from_env(
        {
            "BINLOG_CDC_LOCAL_FS": "hadoop",
            "BINLOG_CDC_CLASS_ARCHIVE": "no",
            "BINLOG_CDC_POSITION_DELTA_MAX_ROWS": "1000",
            "BINLOG_CDC_JDBC_JARS": "",
            "BINLOG_CDC_WAREHOUSE": "",
        }
    )
    assert not got.local_fs and not got.class_archive
    assert got.position_delta_max_rows == 1000 and got.jdbc_jars == "" and got.warehouse is None
    assert settings.from_env({"BINLOG_CDC_POSITION_DELTA_MAX_ROWS": "many"}).position_delta_max_rows is None


def test_the_modules_read_the_settings_as_the_environment_changes(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in settings.ENV_NAMES:
        monkeypatch.delenv(name, raising=False)
    assert position_delta.enabled() and new_keys.enabled() and file_append.enabled()
    held = settings.current()
    assert settings.current() is held  # read once
    monkeypatch.setenv(position_delta.POSITION_DELTA_ENV, "off")
    monkeypatch.setenv(position_delta.MAX_ROWS_ENV, "7")
    monkeypatch.setenv(local_fs_jar.ENV, "hadoop")
    monkeypatch.setenv(class_archive.ARCHIVE_ENV, "off")
    monkeypatch.setenv(jars.CACHE_ENV, "/tmp/elsewhere")
    assert not position_delta.enabled() and position_delta.max_rows() == 7
    assert not local_fs_jar.enabled() and not class_archive.enabled()
    assert jars.cache_dir() == Path("/tmp/elsewhere")
    assert settings.current() is not held and new_keys.enabled()


def test_every_switch_is_documented() -> None:
    text = DOCS.read_text()
    section = text[text.index("## Environment switches") :]
    for name, field in settings.FIELDS.items():
        assert f"| `{field.metadata['env']}` | `{name}` |" in section, name
