"""The connection forms of this provider's connection types, in one place.

Airflow 3.2+ reads them from :func:`~airflow_provider_binlog.get_provider_info.get_provider_info`
(``conn-fields`` and ``ui-field-behaviour`` of each ``connection-types`` entry, without importing the
hooks); older Airflow 3 versions call the hook class methods ``get_connection_form_widgets()`` and
``get_ui_field_behaviour()``, which :func:`legacy_widgets` and :func:`legacy_behaviour` derive from
the same dicts. The extra fields land in the connection's ``extra`` JSON under their own names
(``{"timeout": 15}``), which is where the hooks read them.

No Airflow import here: the provider info imports this module during discovery.
"""

from __future__ import annotations

from importlib import metadata
from typing import Any

OFFICIAL_MYSQL_PROVIDER = "apache-airflow-providers-mysql"

MAX_LABEL = 20
"""Characters a field's label may have: the form lays labels out in a column of their own, and a
longer one pushed its input out of line with the others (details go in the description or the
placeholder)."""

_STRING = {"type": ["string", "null"]}
_INTEGER = {"type": ["integer", "null"]}
_NUMBER = {"type": ["number", "null"]}

ZOOKEEPER: dict[str, Any] = {
    "conn-fields": {
        "acl": {
            "label": "Node ACL",
            "description": "creator: readable and writable only with the digest credentials (the default "
            "when a digest user is set); open: world-readable and writable (the default without one)",
            "schema": {"type": ["string", "null"], "enum": ["creator", "open"]},
        },
        "timeout": {
            "label": "Session timeout (s)",
            "description": "A worker that stops answering loses the destination's running node after this",
            "schema": {**_NUMBER, "default": 15},
        },
    },
    "ui-field-behaviour": {
        # the port stays: a connection made from a URI (zookeeper://zk1:2182/chroot) holds it there,
        # and an edit form without it saved the connection without its port
        "hidden-fields": [],
        "relabeling": {
            "host": "Hosts",
            "port": "Port",
            "schema": "Chroot",
            "login": "Digest user",
            "password": "Digest password",
        },
        "placeholders": {
            "host": "zk1:2181,zk2:2181,zk3:2181",
            "port": "2181 (for hosts without a port)",
            "schema": "/binlog-cdc",
            "login": "cdc (optional)",
            "password": "digest password (optional)",
        },
    },
}

CANAL: dict[str, Any] = {
    "conn-fields": {
        "timeout": {
            "label": "Timeout (s)",
            "description": "Bound of each connect, send and receive with the canal server",
            "schema": {**_NUMBER, "default": 30},
        },
        "zookeeper_hosts": {
            "label": "ZooKeeper hosts",
            "description": "Cluster mode, instead of host and port: zk1:2181,zk2:2181[/chroot] of the "
            "canal servers; the client connects to the one canal's running node names",
            "schema": {"type": ["string", "null"]},
        },
        "hold_dir": {
            "label": "Hold directory",
            "description": "Where the one-reader-per-destination lock file lives (default: the "
            "temporary directory); readers on several machines need ZooKeeper hosts instead",
            "schema": {"type": ["string", "null"]},
        },
    },
    "ui-field-behaviour": {
        "hidden-fields": ["schema"],
        "relabeling": {"login": "canal user", "password": "canal password"},
        "placeholders": {"host": "canal-server", "port": "11111", "login": "canal"},
    },
}

MYSQL: dict[str, Any] = {
    "conn-fields": {
        "server_id": {
            "label": "Replica server id",
            "description": "The id this reader registers with (unique among the source's replicas; "
            "default: a random one per read)",
            "schema": _INTEGER,
        },
        "heartbeat_period": {
            "label": "Heartbeat (s)",
            "description": "How often an idle source sends a heartbeat event",
            "schema": _NUMBER,
        },
        "ssl_ca": {"label": "TLS CA file", "schema": _STRING},
        "ssl_cert": {"label": "TLS client cert file", "schema": _STRING},
        "ssl_key": {"label": "TLS client key file", "schema": _STRING},
    },
    "ui-field-behaviour": {
        "hidden-fields": ["schema"],
        "relabeling": {"login": "User"},
        "placeholders": {
            "host": "db.example.com",
            "port": "3306",
            "login": "cdc (REPLICATION SLAVE, REPLICATION CLIENT, SELECT)",
        },
    },
}


def official_mysql_provider() -> bool:
    """Whether the official MySQL provider is installed (then the ``mysql`` type is its own)."""
    try:
        metadata.distribution(OFFICIAL_MYSQL_PROVIDER)
    except metadata.PackageNotFoundError:
        return False
    return True


def given(extra: dict[str, Any], key: str) -> Any:
    """An extra's value, ``None`` when absent or empty (a form leaves empty fields as null or "")."""
    value = extra.get(key)
    return None if value in (None, "") else value


def tested(ok: bool, message: str, conn_id: str) -> tuple[bool, str]:
    """A ``test_connection`` result as the Test button shows it: without the connection's id. The UI
    tests the form's values under a random transient id (``AIRFLOW_CONN_<random>``), which would read
    as the name of some other connection; the host and user the message names say which one it is."""
    for said, instead in ((f" (connection {conn_id!r})", ""), (f"connection {conn_id!r}", "this connection")):
        message = message.replace(said, instead)
    return ok, message


def legacy_behaviour(form: dict[str, Any]) -> dict[str, Any]:
    """``get_ui_field_behaviour()`` of a form (Python-style keys)."""
    behaviour = form["ui-field-behaviour"]
    return {
        "hidden_fields": list(behaviour["hidden-fields"]),
        "relabeling": dict(behaviour["relabeling"]),
        "placeholders": dict(behaviour["placeholders"]),
    }


def legacy_widgets(form: dict[str, Any]) -> dict[str, Any]:
    """``get_connection_form_widgets()`` of a form: WTForms fields (imported here, only by the older
    Airflow versions that call it, where the web server has them)."""
    from flask_appbuilder.fieldwidgets import BS3TextFieldWidget
    from flask_babel import lazy_gettext
    from wtforms import IntegerField, StringField
    from wtforms.validators import Optional, any_of

    widgets: dict[str, Any] = {}
    for name, field in form["conn-fields"].items():
        schema = field["schema"]
        kinds = schema["type"]
        validators: list[Any] = [Optional()]
        if "enum" in schema:
            validators.append(any_of(schema["enum"]))
        cls = IntegerField if "integer" in kinds else StringField  # numbers: text, parsed by the hook
        widgets[name] = cls(
            lazy_gettext(field["label"]),
            widget=BS3TextFieldWidget(),
            validators=validators,
            description=field.get("description", ""),
            default=schema.get("default"),
        )
    return widgets
