"""The ``mysql`` and ``zookeeper`` connection types in the installed Airflow (issue #18).

* Airflow's own ProvidersManager registers ``mysql`` with :class:`MySqlSourceHook` and reads the
  forms (labels, placeholders, hidden and extra fields) from the provider info, which validates
  against Airflow's schemas; the older hook methods give the same forms.
* With the official MySQL provider installed (a distribution of that name on the path of a
  subprocess), ``mysql`` stays the official provider's and nothing warns.
* ``airflow connections add --conn-type mysql`` keeps the type, and ``airflow connections test``
  runs the binlog check against the real MariaDB (with ``[core] test_connection`` enabled; refused
  without it), naming what is wrong and the fix, never the password.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
import types
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from airflow_harness import AIRFLOW

from airflow_provider_binlog.dev.services import MariaDbServer, ZooKeeperServer
from airflow_provider_binlog.get_provider_info import get_provider_info
from airflow_provider_binlog.hooks import forms

MYSQL_HOOK = "airflow_provider_binlog.hooks.mysql.MySqlSourceHook"
ZOOKEEPER_HOOK = "airflow_provider_binlog.hooks.zookeeper.ZooKeeperHook"


def _providers_manager() -> Any:
    from airflow.providers_manager import ProvidersManager

    return ProvidersManager()


def test_provider_info_validates_against_airflow_schemas() -> None:
    import jsonschema
    from airflow import providers_manager

    schemas = Path(providers_manager.__file__).parent
    info = get_provider_info()
    jsonschema.validate(info, json.loads((schemas / "provider_info.schema.json").read_text()))
    behaviour_schema = json.loads((schemas / "customized_form_field_behaviours.schema.json").read_text())
    for form in (forms.ZOOKEEPER, forms.MYSQL, forms.CANAL):
        jsonschema.validate(forms.legacy_behaviour(form), behaviour_schema)
        for name, field in form["conn-fields"].items():
            assert field["label"] and "type" in field["schema"], name
            jsonschema.Draft7Validator.check_schema(field["schema"])
    assert {t["connection-type"] for t in info["connection-types"]} == {"mysql", "zookeeper", "canal"}


def test_providers_manager_registers_types_and_forms() -> None:
    pm = _providers_manager()
    mysql, zookeeper = pm.hooks["mysql"], pm.hooks["zookeeper"]
    assert mysql is not None and mysql.hook_class_name == MYSQL_HOOK and mysql.connection_testable
    assert mysql.package_name == "airflow-provider-binlog"
    assert zookeeper is not None and zookeeper.hook_class_name == ZOOKEEPER_HOOK
    canal = pm.hooks["canal"]
    assert canal is not None and canal.hook_class_name == "airflow_provider_binlog.hooks.canal.CanalHook"
    assert pm.field_behaviours["canal"] == forms.legacy_behaviour(forms.CANAL)
    # the forms as the UI's API serves them (added only when they validate)
    assert pm.field_behaviours["zookeeper"] == forms.legacy_behaviour(forms.ZOOKEEPER)
    assert pm.field_behaviours["mysql"] == forms.legacy_behaviour(forms.MYSQL)
    widgets = pm.connection_form_widgets
    for conn_type, form in (("zookeeper", forms.ZOOKEEPER), ("mysql", forms.MYSQL)):
        for name, field in form["conn-fields"].items():
            widget = widgets[f"extra__{conn_type}__{name}"]
            assert widget.field["schema"]["title"] == field["label"], name
            assert widget.hook_class_name == (MYSQL_HOOK if conn_type == "mysql" else ZOOKEEPER_HOOK)
    from airflow.api_fastapi.core_api.services.ui.connections import HookMetaService

    meta = {m.connection_type: m for m in HookMetaService.hook_meta_data()}
    zk = meta["zookeeper"]
    assert zk.standard_fields is not None and zk.extra_fields is not None
    assert zk.standard_fields.host is not None and zk.standard_fields.host.title == "Hosts"
    # the port is in the edit form: a connection made from a URI holds it there, and saving a form
    # without it dropped it from the hosts
    assert zk.standard_fields.port is not None and not zk.standard_fields.port.hidden
    assert zk.standard_fields.port.title == "Port"
    assert set(zk.extra_fields) == {"acl", "timeout"}
    assert zk.extra_fields["timeout"]["value"] == 15
    my = meta["mysql"]
    assert my.standard_fields is not None and my.standard_fields.url_schema is not None
    assert my.standard_fields.url_schema.hidden and my.hook_name == "MySQL (binlog CDC source)"


class _Field:
    """Records how a stub WTForms field class was called."""

    def __init__(self, label: str, **kwargs: Any) -> None:
        self.label, self.kwargs = label, kwargs


def test_legacy_hook_methods_give_the_same_forms(monkeypatch: pytest.MonkeyPatch) -> None:
    """get_connection_form_widgets()/get_ui_field_behaviour() (Airflow 3 before 3.2) from the same
    dicts: WTForms and Flask-AppBuilder are not installed here, so stand-ins record the calls."""
    from airflow_provider_binlog.hooks.mysql import MySqlSourceHook
    from airflow_provider_binlog.hooks.zookeeper import ZooKeeperHook

    integer = type("IntegerField", (_Field,), {})
    string = type("StringField", (_Field,), {})
    stubs = {
        "wtforms": {"IntegerField": integer, "StringField": string},
        "wtforms.validators": {"Optional": lambda: "optional", "any_of": lambda values: ("any_of", values)},
        "flask_babel": {"lazy_gettext": lambda text: text},
        "flask_appbuilder": {},
        "flask_appbuilder.fieldwidgets": {"BS3TextFieldWidget": lambda: "text"},
    }
    for name, attrs in stubs.items():
        module = types.ModuleType(name)
        module.__dict__.update(attrs)
        monkeypatch.setitem(sys.modules, name, module)
    for hook, form in ((ZooKeeperHook, forms.ZOOKEEPER), (MySqlSourceHook, forms.MYSQL)):
        assert hook.get_ui_field_behaviour() == forms.legacy_behaviour(form)
        widgets = hook.get_connection_form_widgets()
        assert set(widgets) == set(form["conn-fields"])
        for name, widget in widgets.items():
            field = form["conn-fields"][name]
            assert widget.label == field["label"]
            assert isinstance(widget, integer if "integer" in field["schema"]["type"] else string)
            assert widget.kwargs["default"] == field["schema"].get("default")
    acl = ZooKeeperHook.get_connection_form_widgets()["acl"]
    assert ("any_of", ["creator", "open"]) in acl.kwargs["validators"]


_STAND_IN_HOOK = """
from airflow.sdk import BaseHook


class MySqlHook(BaseHook):
    conn_name_attr = "mysql_conn_id"
    default_conn_name = "mysql_default"
    conn_type = "mysql"
    hook_name = "MySQL"
"""

_STAND_IN_INFO = """
def get_provider_info():
    return {
        "package-name": "apache-airflow-providers-mysql",
        "name": "MySQL",
        "description": "stand-in of the official provider's registration",
        "versions": ["6.7.1"],
        "connection-types": [
            {
                "connection-type": "mysql",
                "hook-class-name": "airflow.providers.mysql.hooks.mysql.MySqlHook",
                "hook-name": "MySQL",
            }
        ],
    }
"""

_PROBE = """
import json, logging
records = []
class Keep(logging.Handler):
    def emit(self, record):
        records.append(record.getMessage())
logging.getLogger().addHandler(Keep())
from airflow.providers_manager import ProvidersManager
from airflow_provider_binlog.get_provider_info import get_provider_info
hooks = ProvidersManager().hooks
print(json.dumps({
    "mysql": hooks["mysql"].hook_class_name,
    "mysql_package": hooks["mysql"].package_name,
    "zookeeper": hooks["zookeeper"].hook_class_name,
    "ours": [t["connection-type"] for t in get_provider_info()["connection-types"]],
    "warnings": [r for r in records if "already registered" in r],
}))
"""


def test_official_mysql_provider_keeps_its_type(tmp_path: Path, airflow_home: Path) -> None:
    """An installed ``apache-airflow-providers-mysql`` (here a distribution of that name with the
    same entry point on a subprocess's path) owns ``mysql``: ours leaves the type out, so Airflow's
    keep-the-first rule never hands the official provider's connections to our hook."""
    dist = tmp_path / "apache_airflow_providers_mysql-6.7.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: apache-airflow-providers-mysql\nVersion: 6.7.1\n"
    )
    (dist / "entry_points.txt").write_text(
        "[apache_airflow_provider]\n"
        "provider_info = airflow.providers.mysql.get_provider_info:get_provider_info\n"
    )
    package = tmp_path / "airflow" / "providers" / "mysql"  # ``airflow`` extends its path over sys.path
    (package / "hooks").mkdir(parents=True)
    (package / "get_provider_info.py").write_text(textwrap.dedent(_STAND_IN_INFO))
    (package / "hooks" / "mysql.py").write_text(_STAND_IN_HOOK)
    env = {**os.environ, "AIRFLOW_HOME": str(airflow_home), "PYTHONPATH": str(tmp_path)}
    proc = subprocess.run(
        [sys.executable, "-c", _PROBE], env=env, capture_output=True, text=True, timeout=120, check=False
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    found = json.loads(proc.stdout.strip().splitlines()[-1])
    assert found["mysql"] == "airflow.providers.mysql.hooks.mysql.MySqlHook", found
    assert found["mysql_package"] == "apache-airflow-providers-mysql"
    assert found["zookeeper"] == ZOOKEEPER_HOOK
    assert found["ours"] == ["zookeeper", "canal"] and found["warnings"] == [], found


# ---------------------------------------------------------------------------------------- the CLI


def _airflow(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([AIRFLOW, *args], env=env, capture_output=True, text=True, timeout=180, check=False)


@pytest.fixture
def cli_env(airflow_home: Path) -> Iterator[dict[str, str]]:
    env = {
        k: v for k, v in os.environ.items() if not k.startswith(("AIRFLOW_CONN_", "AIRFLOW__CORE__TEST_CONN"))
    }
    env.update(AIRFLOW_HOME=str(airflow_home), AIRFLOW__CORE__LOAD_EXAMPLES="false")
    yield env


@pytest.fixture
def no_replication_user(mariadb: MariaDbServer) -> Iterator[tuple[str, str]]:
    """A user with no privilege at all (USAGE)."""
    user, password = "cdc_nothing", "nothing-" + uuid.uuid4().hex
    mariadb.execute(f"DROP USER IF EXISTS {user}@'%'")
    mariadb.execute(f"CREATE USER {user}@'%%' IDENTIFIED BY %s", (password,))
    yield user, password
    mariadb.execute(f"DROP USER IF EXISTS {user}@'%'")


@pytest.mark.integration
def test_cli_add_and_test_mysql_and_zookeeper(
    cli_env: dict[str, str],
    mariadb: MariaDbServer,
    zookeeper: ZooKeeperServer,
    zk_chroot: str,
    no_replication_user: tuple[str, str],
) -> None:
    suffix = uuid.uuid4().hex[:8]
    good, bad, zk = f"src_ok_{suffix}", f"src_bad_{suffix}", f"zk_{suffix}"
    user, password = no_replication_user
    try:
        added = _airflow(
            cli_env, "connections", "add", good, "--conn-type", "mysql", "--conn-host", mariadb.host,
            "--conn-port", str(mariadb.port), "--conn-login", mariadb.repl_user,
            "--conn-password", mariadb.repl_password,
        )  # fmt: skip
        assert added.returncode == 0, added.stdout + added.stderr
        assert "generic" not in added.stdout + added.stderr, added.stdout + added.stderr
        got = _airflow(cli_env, "connections", "get", good, "-o", "json")
        assert json.loads(got.stdout)[0]["conn_type"] == "mysql", got.stdout
        added = _airflow(
            cli_env, "connections", "add", bad, "--conn-type", "mysql", "--conn-host", mariadb.host,
            "--conn-port", str(mariadb.port), "--conn-login", user, "--conn-password", password,
            "--conn-extra", json.dumps({"server_id": mariadb.server_id}),
        )  # fmt: skip
        assert added.returncode == 0, added.stdout + added.stderr
        added = _airflow(cli_env, "connections", "add", zk, "--conn-uri", zookeeper.airflow_uri(zk_chroot))
        assert added.returncode == 0, added.stdout + added.stderr

        refused = _airflow(cli_env, "connections", "test", good)  # [core] test_connection is off by default
        assert refused.returncode != 0 and "disabled" in refused.stdout, refused.stdout

        enabled = {**cli_env, "AIRFLOW__CORE__TEST_CONNECTION": "Enabled"}
        ok = _airflow(enabled, "connections", "test", good)
        assert ok.returncode == 0 and "Connection success!" in ok.stdout, ok.stdout + ok.stderr
        failed = _airflow(enabled, "connections", "test", bad)
        out = " ".join((failed.stdout + failed.stderr).split())  # the console wraps long lines
        assert failed.returncode != 0 and "Connection failed!" in out, out
        assert f"source {mariadb.host}:{mariadb.port} is not ready for binlog CDC" in out, out
        # the id is the command's own (Airflow prints it); the message does not repeat it: the Test
        # button's would be a random one
        assert bad not in out.split("Connection failed!", 1)[1], out
        assert f"user {user!r} lacks REPLICATION SLAVE and REPLICATION CLIENT" in out, out
        assert f"GRANT REPLICATION SLAVE, REPLICATION CLIENT ON *.* TO '{user}'@'%'" in out, out
        assert f"the replica server_id {mariadb.server_id} is the source's own server_id" in out, out
        assert password not in out and mariadb.repl_password not in ok.stdout + ok.stderr
        zk_ok = _airflow(enabled, "connections", "test", zk)
        assert zk_ok.returncode == 0 and "Connection success!" in zk_ok.stdout, zk_ok.stdout + zk_ok.stderr
    finally:
        for conn_id in (good, bad, zk):
            _airflow(cli_env, "connections", "delete", conn_id)


def test_labels_fit_the_form_column() -> None:
    """Every label and relabeling of the forms fits the form's label column (forms.MAX_LABEL): a
    longer one pushed its input out of line; details are in descriptions and placeholders."""
    for form in (forms.ZOOKEEPER, forms.CANAL, forms.MYSQL):
        labels = [f["label"] for f in form["conn-fields"].values()]
        labels += list(form["ui-field-behaviour"]["relabeling"].values())
        assert [label for label in labels if len(label) > forms.MAX_LABEL] == [], labels


def test_a_test_message_names_no_connection_id() -> None:
    assert forms.tested(False, "source db:3306 (connection 'Xy3kP9aB') is not ready: x", "Xy3kP9aB") == (
        False, "source db:3306 is not ready: x",
    )  # fmt: skip
    said = forms.tested(False, "cannot reach ZooKeeper at zk:2181 (connection 'Xy3kP9aB')", "Xy3kP9aB")
    assert said == (False, "cannot reach ZooKeeper at zk:2181")
    assert forms.tested(True, "ZooKeeper connection 'Xy3kP9aB' has no host", "Xy3kP9aB")[1] == (
        "ZooKeeper this connection has no host"
    )


@pytest.fixture
def ui_api(airflow_home: Path, tmp_path: Path) -> Iterator[str]:
    """``airflow api-server`` as a browser's UI talks to it (simple auth manager, everyone admin,
    ``[core] test_connection`` enabled); yields its base URL; stopped after (bounded)."""
    import signal
    import time
    import urllib.request

    from airflow_provider_binlog.dev.services import free_port

    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AIRFLOW_CONN_", "AIRFLOW__"))}
    env.update(
        AIRFLOW_HOME=str(airflow_home), AIRFLOW__CORE__LOAD_EXAMPLES="false",
        AIRFLOW__CORE__TEST_CONNECTION="Enabled", AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_ALL_ADMINS="True",
        AIRFLOW__API_AUTH__JWT_SECRET=uuid.uuid4().hex, AIRFLOW__API__SECRET_KEY=uuid.uuid4().hex,
    )  # fmt: skip
    log = tmp_path / "api-server.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            [AIRFLOW, "api-server", "--host", "127.0.0.1", "--port", str(port), "--workers", "1"],
            env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
        )  # fmt: skip
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                with urllib.request.urlopen(f"{base}/api/v2/version", timeout=2):
                    break
            except OSError:
                assert proc.poll() is None, log.read_text()[-3000:]
                assert time.monotonic() < deadline, "the api-server did not answer within 120 s"
                time.sleep(0.5)
        yield base
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)


def _call(base: str, path: str, body: dict[str, Any] | None = None) -> Any:
    import urllib.request

    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(base + path, data=data, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=60) as answer:
        return json.loads(answer.read())


def test_the_forms_and_the_test_button_through_the_ui_api(
    ui_api: str, zookeeper: ZooKeeperServer, zk_chroot: str, mariadb: MariaDbServer
) -> None:
    """What the browser gets from the api-server: the forms' fields (the ZooKeeper port shown, every
    label within the column) and the Test button's answers, which name the host tested and never
    the random id the api-server tests the form's values under."""
    meta = {m["connection_type"]: m for m in _call(ui_api, "/ui/connections/hook_meta")}
    zk = meta["zookeeper"]["standard_fields"]
    assert zk["port"]["hidden"] is False and zk["host"]["title"] == "Hosts", zk
    for conn_type in ("zookeeper", "mysql", "canal"):
        fields = meta[conn_type]
        titles = [f["title"] for f in fields["standard_fields"].values() if f and f.get("title")]
        titles += [f["schema"]["title"] for f in (fields["extra_fields"] or {}).values()]
        assert [t for t in titles if len(t) > forms.MAX_LABEL] == [], (conn_type, titles)

    random_id = re.compile(r"connection '[A-Za-z0-9]{8}'")
    ok = _call(ui_api, "/api/v2/connections/test", {
        "connection_id": "zk_form", "conn_type": "zookeeper", "host": zookeeper.host,
        "port": zookeeper.port, "schema": zk_chroot,
    })  # fmt: skip
    assert ok == {"status": True, "message": f"connected to ZooKeeper {zookeeper.host}:{zookeeper.port}"}, ok
    failed = _call(ui_api, "/api/v2/connections/test", {
        "connection_id": "src_form", "conn_type": "mysql", "host": mariadb.host, "port": mariadb.port,
        "login": "nobody_" + uuid.uuid4().hex[:6], "password": "wrong-password",
    })  # fmt: skip
    assert failed["status"] is False and mariadb.host in failed["message"], failed
    assert not random_id.search(failed["message"]) and "wrong-password" not in failed["message"], failed
