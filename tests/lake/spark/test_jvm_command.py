"""``lake.spark.jvm_command``: the local driver's command kept from Spark's launcher.

Unit tests of the pure parts (the launcher's output, the key, eligibility, the script's quoting),
then real starts in child processes (the harness's own session lives for the whole run): a driver
started from the kept script runs with exactly the command line and the Spark environment that
``spark-submit`` gives it, and a kept script that fails is replaced by a start through
``spark-submit``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from airflow_provider_binlog.lake.spark import jvm_command as jc

LOCAL = {"spark.master": "local[2]", "spark.driver.memory": "1g", "spark.app.name": "a"}


def test_launcher_output_is_parsed_after_its_text_lines() -> None:
    words = [b"/usr/bin/java", b"-cp", b"/a b/*", b"-Xmx1g", jc.SUBMIT_CLASS.encode(), b"--conf", b"x=1"]
    body = b"\0\n" + b"".join(w + b"\0" for w in words)
    assert jc.parse_launcher_output(body) == [w.decode() for w in words]
    assert jc.parse_launcher_output(b"a warning\nanother\n" + body) == [w.decode() for w in words]
    with pytest.raises(jc.LaunchCommandError):
        jc.parse_launcher_output(b"Error: no such class\n")
    with pytest.raises(jc.LaunchCommandError):
        jc.parse_launcher_output(b"\0\n")


def test_the_prefix_ends_with_the_submit_class() -> None:
    command = ["env", "LD_LIBRARY_PATH=/x", "java", "-Xmx1g", jc.SUBMIT_CLASS, "--conf", "a=b", "x"]
    assert jc.driver_prefix(command) == command[:5]
    with pytest.raises(jc.LaunchCommandError):
        jc.driver_prefix(["java", "-version"])


def _home(tmp_path: Path) -> str:
    (tmp_path / "jars").mkdir(parents=True, exist_ok=True)
    return str(tmp_path)


def test_only_a_local_client_driver_without_spark_config_files_is_kept(tmp_path: Path) -> None:
    home = _home(tmp_path / "spark")
    env = {"JAVA_HOME": "/opt/java", "PATH": "/usr/bin"}
    assert jc.eligible(LOCAL, home, env)
    assert jc.eligible({**LOCAL, "spark.master": "local"}, home, env)
    assert not jc.eligible({**LOCAL, "spark.master": "spark://h:7077"}, home, env)
    assert not jc.eligible({**LOCAL, "spark.master": "yarn"}, home, env)
    assert not jc.eligible({**LOCAL, "spark.submit.deployMode": "cluster"}, home, env)
    assert not jc.eligible(LOCAL, home, {**env, jc.DIRECT_LAUNCH_ENV: "off"})
    for name in jc.CONF_FILES:
        conf = tmp_path / f"conf-{name}"
        conf.mkdir()
        (conf / name).write_text("")
        assert not jc.eligible(LOCAL, home, {**env, "SPARK_CONF_DIR": str(conf)}), name
    (Path(home) / "conf").mkdir()
    (Path(home) / "conf" / "spark-defaults.conf").write_text("spark.driver.memory 4g\n")
    assert not jc.eligible(LOCAL, home, env)  # the launcher would read it


def test_the_key_follows_what_the_command_depends_on(tmp_path: Path) -> None:
    home = _home(tmp_path)
    env = {"JAVA_HOME": "/opt/java", "PATH": "/usr/bin", "AIRFLOW_CTX_DAG_RUN_ID": "r1"}
    key = jc.launch_key(LOCAL, home, env)
    # the rest of the settings reach the driver as arguments, not through the kept command
    others = {**LOCAL, "spark.app.name": "b", "spark.sql.shuffle.partitions": "9"}
    assert jc.launch_key(others, home, env) == key
    assert jc.launch_key(LOCAL, home, {**env, "AIRFLOW_CTX_DAG_RUN_ID": "r2"}) == key
    assert jc.launch_key(LOCAL, home, {**env, jc.DIRECT_LAUNCH_ENV: "on"}) == key
    changed = [
        jc.launch_key({**LOCAL, "spark.driver.memory": "2g"}, home, env),
        jc.launch_key({**LOCAL, "spark.driver.extraJavaOptions": "-Dx=1"}, home, env),
        jc.launch_key({**LOCAL, "spark.driver.extraClassPath": "/x.jar"}, home, env),
        jc.launch_key({**LOCAL, "spark.master": "local[4]"}, home, env),
        jc.launch_key(LOCAL, home, {**env, "JAVA_HOME": "/opt/other"}),
        jc.launch_key(LOCAL, home, {**env, "SPARK_SUBMIT_OPTS": "-Dy=2"}),
        jc.launch_key(LOCAL, home, {**env, "HADOOP_CONF_DIR": "/etc/hadoop"}),
        jc.launch_key(LOCAL, _home(tmp_path / "other"), env),
    ]
    assert key not in changed and len(set(changed)) == len(changed)


def test_the_script_passes_every_argument_unchanged(tmp_path: Path) -> None:
    """The script's own words and pyspark's arguments reach the program as they are (spaces,
    quotes, ``$``, newlines), with spark-submit's exports."""
    show = "import json, os, sys; a = sys.argv; print(json.dumps([a[1:], {a[1]: os.environ.get(a[1])}]))"
    prefix = [sys.executable, "-c", show]
    script = tmp_path / "s.sh"
    script.write_text(jc.render_script(prefix, "/spark home's", {}, "k"))
    script.chmod(0o755)
    args = ["SPARK_HOME", "--conf", 'spark.app.name=it\'s a "test" $HOME', "a\nb", ""]
    out = subprocess.run([str(script), *args], capture_output=True, text=True, check=True, timeout=60)
    got_args, env = json.loads(out.stdout)
    assert got_args == args
    assert env == {"SPARK_HOME": "/spark home's"}


CHILD = textwrap.dedent(
    """
    import json, os, sys
    from pathlib import Path
    import psutil
    from airflow_provider_binlog.lake.spark import jvm_command
    from airflow_provider_binlog.lake.spark.session import create_session, stop_session

    folder, warehouse, mode = sys.argv[1], sys.argv[2], sys.argv[3]
    jvm_command.script_dir = lambda: Path(folder)
    if mode == "broken":  # every kept script starts nothing
        real = jvm_command.driver_script
        def broken(settings, env=None):
            path = real(settings, env)
            Path(path).write_text("#!/bin/sh\\nexit 3\\n")
            return path
        jvm_command.driver_script = broken
    spark = create_session(app_name="jvm-command-test", master="local[1]", warehouse=warehouse)
    java = [p for p in psutil.Process().children(recursive=True) if p.name() == "java"]
    names = ("SPARK_HOME", "PYTHONHASHSEED", "SPARK_CONF_DIR", "SPARK_SCALA_VERSION", "SPARK_ENV_LOADED")
    environ = java[0].environ()
    out = {
        "cmdline": java[0].cmdline(),
        "env": {k: environ.get(k) for k in names},
        "jvms": len(java),
        "count": spark.range(7).count(),
        "scripts": sorted(p.name for p in Path(folder).glob("*.sh")) if Path(folder).exists() else [],
    }
    stop_session(spark)
    print(json.dumps(out))
    """
)


def _start(tmp_path: Path, mode: str, **env: str) -> dict:
    folder = tmp_path / "launch"
    proc = subprocess.run(
        [sys.executable, "-c", CHILD, str(folder), str(tmp_path / "wh"), mode],
        capture_output=True, text=True, timeout=300, env={**os.environ, **env},
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    out: dict = json.loads(proc.stdout.strip().splitlines()[-1])
    out["stderr"] = proc.stderr
    return out


def _split(cmdline: list[str]) -> tuple[list[str], list[tuple[str, str]], list[str]]:
    """A driver's command line as (the JVM's part up to the submit class, its ``--conf`` settings
    sorted, the other arguments): the launcher writes the settings in an order of its own, and
    SparkSubmit reads them into a map."""
    at = cmdline.index(jc.SUBMIT_CLASS) + 1
    args, confs, rest = cmdline[at:], [], []
    while args:
        if args[0] == "--conf":
            key, _, value = args[1].partition("=")
            confs.append((key, value))
            args = args[2:]
        else:
            rest.append(args.pop(0))
    return cmdline[:at], sorted(confs), rest


@pytest.mark.spark
def test_a_kept_command_starts_the_driver_spark_submit_would_start(tmp_path: Path) -> None:
    through_submit = _start(tmp_path, "plain", **{jc.DIRECT_LAUNCH_ENV: "off"})
    assert through_submit["scripts"] == []
    first = _start(tmp_path, "plain")  # builds the script, then starts from it
    again = _start(tmp_path, "plain")  # starts from the kept script
    assert len(first["scripts"]) == 1 and again["scripts"] == first["scripts"]
    for run in (first, again):
        assert run["count"] == 7 and run["jvms"] == 1
        assert _split(run["cmdline"]) == _split(through_submit["cmdline"])
        assert run["env"] == through_submit["env"]
    assert through_submit["env"]["PYTHONHASHSEED"] == "0" and through_submit["env"]["SPARK_HOME"]


@pytest.mark.spark
def test_a_kept_command_that_fails_falls_back_to_spark_submit(tmp_path: Path) -> None:
    out = _start(tmp_path, "broken")
    assert out["count"] == 7
    assert out["scripts"] == []  # the failed script is gone; the next start builds it again
    assert "did not start from its kept command" in out["stderr"]


def test_a_script_is_kept_for_its_owner_only_and_an_unwritable_cache_starts_through_spark_submit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    prefix = ["/usr/bin/java", "-Dsecret=1", jc.SUBMIT_CLASS]
    built: list[str] = []
    monkeypatch.setattr(jc, "build_prefix", lambda settings, home, env: built.append(home) or prefix)
    monkeypatch.setattr(jc, "script_dir", lambda: tmp_path / "launch")
    env = {k: v for k, v in os.environ.items() if k != jc.DIRECT_LAUNCH_ENV}
    script = jc.driver_script(LOCAL, env)
    assert script is not None and Path(script).parent == tmp_path / "launch"
    assert Path(script).stat().st_mode & 0o777 == 0o700
    assert "-Dsecret=1" in Path(script).read_text()
    assert jc.driver_script(LOCAL, env) == script and len(built) == 1  # kept: built once
    (tmp_path / "file").write_text("")
    monkeypatch.setattr(jc, "script_dir", lambda: tmp_path / "file" / "launch")  # cannot be made
    assert jc.driver_script(LOCAL, env) is None
