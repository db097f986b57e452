"""The product's switches, one settings object (:class:`Settings`), fed by the environment.

Every field is set by one ``BINLOG_CDC_*`` environment variable (its name in the field's
``metadata["env"]``; the table in ``docs/parameters.md``, section "Environment switches"). Most of
them exist to measure one path against another (benchmark A/B switches) or to step around a
machine's limits; a task needs none of them. :func:`current` reads them once and keeps the
settings, and reads again only when one of the variables changed since (a test, a benchmark's
A/B run or the class archive's training run sets one between runs in one process), so every
module sees the same settings and none reads the environment itself. :func:`from_env` reads
another environment (a child process's, say).

Level 0 (standard library only): the binlog layer (``pure_python``), canal's network protocol
(``cache_dir``), the lake (most of them; :mod:`.lake.settings` is its name for this module), the
hooks and operators (``meta_dir``, ``spark_master``, ``staging_uri``) and the failpoints
(``failpoints``) read it. The dev tools and the tests read their own variables where they use them.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping
from typing import Any

OFF = ("off", "0", "false")


def _on(text: str | None) -> bool:
    return (text or "").lower() not in OFF


def _switch(env: str, doc: str, parse: Any = _on, default: Any = True) -> Any:
    return dataclasses.field(default=default, metadata={"env": env, "doc": doc, "parse": parse})


def _text(text: str | None) -> str | None:
    return text or None


@dataclasses.dataclass(frozen=True)
class Settings:
    """The switches. A boolean switch is on unless its variable is ``off``, ``0`` or ``false``
    (``pure_python``: off unless its variable is set to other than ``0``); a text is ``None`` when
    its variable is unset."""

    warehouse: str | None = _switch(
        "BINLOG_CDC_WAREHOUSE",
        "the default local warehouse (else ``~/.local/share/airflow-provider-binlog/warehouse``)",
        parse=lambda t: t or None,
        default=None,
    )
    cache: str | None = _switch(
        "BINLOG_CDC_CACHE",
        "the folder of built jars, class archives and kept launch scripts "
        "(else ``$XDG_CACHE_HOME/airflow-provider-binlog``)",
        parse=lambda t: t or None,
        default=None,
    )
    jarjar: str | None = _switch(
        "BINLOG_CDC_JARJAR",
        "the jarjar jar that relocates Iceberg's Jackson once (else Debian's ``/usr/share/java/jarjar.jar``)",
        parse=lambda t: t,
        default=None,
    )
    jdbc_jars: str | None = _switch(
        "BINLOG_CDC_JDBC_JARS",
        "JDBC driver jars for a JDBC catalog, separated by ``:`` (empty: none; else PostgreSQL's "
        "Debian jar when installed)",
        parse=lambda t: t,
        default=None,
    )
    class_archive: bool = _switch(
        "BINLOG_CDC_CLASS_ARCHIVE",
        "the local driver JVM's class-data-sharing archive (``no`` turns it off too)",
        parse=lambda t: (t or "").strip().lower() not in (*OFF, "no"),
    )
    direct_launch: bool = _switch(
        "BINLOG_CDC_DIRECT_LAUNCH",
        "the local driver JVM started from its kept command instead of through ``spark-submit`` "
        "(``no`` turns it off too)",
        parse=lambda t: (t or "").lower() not in (*OFF, "no"),
    )
    local_fs: bool = _switch(
        "BINLOG_CDC_LOCAL_FS",
        "the forkless local file system for a local driver (``hadoop``: Hadoop's own)",
        parse=lambda t: (t or "").strip().lower() != "hadoop",
    )
    file_append: bool = _switch(
        "BINLOG_CDC_FILE_APPEND",
        "inserts (append-only targets, initial snapshot, new keys) as data files the driver writes; "
        "off: through Spark (the driver's merge too)",
    )
    position_delta: bool = _switch(
        "BINLOG_CDC_POSITION_DELTA",
        "a single-key MERGE of a v3 merge-on-read table by the driver; off: Spark's",
    )
    position_delta_max_rows: int | None = _switch(
        "BINLOG_CDC_POSITION_DELTA_MAX_ROWS",
        "the most rows the planned data files may hold for the driver to merge a piece "
        "(else ``position_delta.DEFAULT_MAX_ROWS``)",
        parse=lambda t: int(t) if t and t.strip().isdigit() else None,
        default=None,
    )
    new_keys: bool = _switch(
        "BINLOG_CDC_NEW_KEYS", "a piece whose keys no table row can hold inserted instead of merged"
    )
    key_range: bool = _switch("BINLOG_CDC_KEY_RANGE", "the staged keys' range in a MERGE's condition")
    commit_retry: str | None = _switch(
        "BINLOG_CDC_COMMIT_RETRY",
        "a conflicting commit's retries, ``attempts=N,wait=S,max_wait=S`` (``commits.CommitRetry``)",
        parse=lambda t: t or None,
        default=None,
    )
    spark_master: str | None = _switch(
        "BINLOG_CDC_SPARK_MASTER",
        "the operators' Spark master when the task gives none (else ``local[*]``)",
        parse=_text,
        default=None,
    )
    staging_uri: str | None = _switch(
        "BINLOG_CDC_STAGING_URI",
        "the operator's staging area when the task gives none (else the session's "
        "``spark.binlog_cdc.staging_uri``, else ``<warehouse>/_binlog_cdc_staging``)",
        parse=_text,
        default=None,
    )
    meta_dir: str | None = _switch(
        "BINLOG_CDC_META_DIR",
        "the hook's file meta store without ZooKeeper, when the task gives no ``meta_dir`` "
        "(else ``$AIRFLOW_HOME/binlog-cdc/meta``)",
        parse=_text,
        default=None,
    )
    cache_dir: str | None = _switch(
        "BINLOG_CDC_CACHE_DIR",
        "where canal's protobuf modules are generated (else ``~/.cache/airflow-provider-binlog``)",
        parse=_text,
        default=None,
    )
    pure_python: bool = _switch(
        "BINLOG_CDC_PURE_PYTHON",
        "no C extension (row decoder, fold, staged columns), read when a module loads its extension; "
        "``1``: on",
        parse=lambda t: (t or "").strip() not in ("", "0"),
        default=False,
    )
    failpoints: str | None = _switch(
        "BINLOG_CDC_FAILPOINTS",
        "the crash tests' failpoints, ``name=action@when,...`` (``faults.py``; unset: none)",
        parse=_text,
        default=None,
    )


LakeSettings = Settings  # the lake's name for it (lake/settings.py)

FIELDS = {f.name: f for f in dataclasses.fields(Settings)}
ENV_NAMES = tuple(f.metadata["env"] for f in FIELDS.values())


def env_name(field: str) -> str:
    """The environment variable that feeds ``field``."""
    return str(FIELDS[field].metadata["env"])


def from_env(environ: Mapping[str, str]) -> Settings:
    """The settings an environment gives (unset variables: the defaults)."""
    values = {}
    for name, f in FIELDS.items():
        text = environ.get(f.metadata["env"])
        if text is not None:
            values[name] = f.metadata["parse"](text)
    return Settings(**values)


_current: tuple[tuple[Any, ...], Settings] | None = None
# os.environ's own table (bytes names on POSIX): a look at it costs a tenth of os.environ.get, and
# current() runs for every piece a commit writes
_RAW: dict[Any, Any] | None = getattr(os.environ, "_data", None)
_RAW_NAMES = tuple(os.environ.encodekey(n) for n in ENV_NAMES) if _RAW is not None else ENV_NAMES


def current() -> Settings:
    """This process's settings, read from its environment once (again only after a variable changed)."""
    global _current
    raw = _RAW
    key = tuple(map(raw.get, _RAW_NAMES)) if raw is not None else tuple(map(os.environ.get, ENV_NAMES))
    held = _current
    if held is None or held[0] != key:
        held = _current = (key, from_env(os.environ))
    return held[1]
