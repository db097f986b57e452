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

_STRING = {"type": ["string", "null"]}
_INTEGER = {"type": ["integer", "null"]}
_NUMBER = {"type": ["number", "null"]}

ZOOKEEPER: dict[str, Any] = {
    "conn-fields": {
        "acl": {
            "label": "ACL of created nodes",
            "description": "creator: readable and writable only with the digest credentials (the default "
            "when a digest user is set); open: world-readable and writable (the default without one)",
            "schema": {"type": ["string", "null"], "enum": ["creator", "open"]},
        },
        "timeout": {
            "label": "Session timeout (seconds)",
            "description": "A worker that stops answering loses the destination's running node after this",
            "schema": {**_NUMBER, "default": 15},
        },
    },
    "ui-field-behaviour": {
        "hidden-fields": ["port"],
        "relabeling": {
            "host": "Hosts",
            "schema": "Chroot",
            "login": "Digest user",
            "password": "Digest password",
        },
        "placeholders": {
            "host": "zk1:2181,zk2:2181,zk3:2181",
            "schema": "/binlog-cdc",
            "login": "cdc (optional)",
            "password": "digest password (optional)",
        },
    },
}

CANAL: dict[str, Any] = {
    "conn-fields": {
        "timeout": {
            "label": "Timeout (seconds)",
            "description": "Bound of each connect, send and receive with the canal server",
            "schema": {**_NUMBER, "default": 30},
        },
        "zookeeper_hosts": {
            "label": "ZooKeeper hosts[/chroot] (cluster mode)",
            "description": "Instead of host and port: connect to the server canal's running node names",
            "schema": {"type": ["string", "null"]},
        },
        "hold_dir": {
            "label": "Hold directory (without ZooKeeper)",
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
            "label": "Heartbeat period (seconds)",
            "description": "How often an idle source sends a heartbeat event",
            "schema": _NUMBER,
        },
        "ssl_ca": {"label": "TLS CA file", "schema": _STRING},
        "ssl_cert": {"label": "TLS client certificate file", "schema": _STRING},
        "ssl_key": {"label": "TLS client key file", "schema": _STRING},
    },
    "ui-field-behaviour": {
        "hidden-fields": ["schema"],
        "relabeling": {"login": "User (REPLICATION SLAVE, REPLICATION CLIENT, SELECT)"},
        "placeholders": {"host": "db.example.com", "port": "3306", "login": "cdc"},
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
