"""The local driver JVM's command, built once by Spark's launcher and kept (issue #20).

pyspark starts its driver through ``spark-submit``: bash scripts (one of which runs a Python
interpreter to find Spark's home), then a JVM whose only job is to print the driver's command
(``org.apache.spark.launcher.Main``), then the driver JVM. The first two cost 0.4-0.7 s of every
task's start on this project's 2-core machine (a JVM start each time), before the driver starts.

For a local master, and when Spark's configuration directory holds no ``spark-env.sh``,
``spark-defaults.conf`` or ``java-opts``, the driver's part of that command (``java``, its options
and class path, up to and including ``org.apache.spark.deploy.SparkSubmit``) depends only on the
``spark.driver.*``, master and deploy-mode settings, on environment variables Spark and Java read,
and on the ``java`` binary: :func:`driver_script` has the launcher build it once per such key
(:func:`launch_key`) and writes a script that ``exec``\\ s it with the arguments pyspark gives
``spark-submit`` (``"$@"``: every setting, as ``--conf``), after exporting what ``spark-submit``'s
scripts export. :func:`.jvm_log.launch` starts that script instead of ``spark-submit`` (``Popen``'s
``executable``); the rest of pyspark's launch (connection file, gateway, stdin pipe) is unchanged.
A start through a kept script that fails is retried through ``spark-submit`` and the script removed.

``BINLOG_CDC_DIRECT_LAUNCH=off`` always starts through ``spark-submit``. Scripts live in
``<cache>/launch/`` (:func:`.jars.cache_dir`), readable by their owner only; the :data:`KEEP` used
last are kept. Where they cannot be written, the driver starts through ``spark-submit``.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import shlex
import shutil
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path

from airflow_provider_binlog.lake import settings as lake_settings
from airflow_provider_binlog.lake.spark import jars

log = logging.getLogger(__name__)

DIRECT_LAUNCH_ENV = lake_settings.env_name("direct_launch")
SUBMIT_CLASS = "org.apache.spark.deploy.SparkSubmit"
LAUNCHER_CLASS = "org.apache.spark.launcher.Main"
KEEP = 32
# files in Spark's configuration directory that change the command or the driver's environment
CONF_FILES = ("spark-env.sh", "spark-defaults.conf", "java-opts")
# environment variables the launcher, spark-submit's scripts or the JVM read (by prefix)
ENV_PREFIXES = ("SPARK_", "PYSPARK_", "JAVA_", "_JAVA_", "JDK_", "HADOOP_", "YARN_")
ENV_NAMES = ("PATH", "LD_LIBRARY_PATH", "CLASSPATH")
LAUNCH_TIMEOUT = 60.0


class LaunchCommandError(RuntimeError):
    """Spark's launcher did not print a driver command this module can keep."""


def spark_home() -> str:
    """Spark's home as pyspark finds it (``SPARK_HOME`` or the installed pyspark)."""
    from pyspark.find_spark_home import _find_spark_home

    return str(_find_spark_home())


def conf_dir(home: str, env: Mapping[str, str]) -> str:
    """Spark's configuration directory (``SPARK_CONF_DIR``, else ``<home>/conf``)."""
    return env.get("SPARK_CONF_DIR") or os.path.join(home, "conf")


def java_binary(env: Mapping[str, str]) -> str | None:
    """The ``java`` spark-class runs: ``$JAVA_HOME/bin/java``, else the first on ``PATH``."""
    if env.get("JAVA_HOME"):
        return os.path.join(env["JAVA_HOME"], "bin", "java")
    return shutil.which("java", path=env.get("PATH"))


def eligible(settings: Mapping[str, str], home: str, env: Mapping[str, str]) -> bool:
    """Whether a local driver's command may be kept for these settings (see the module docstring)."""
    if not lake_settings.from_env(env).direct_launch or os.name != "posix":
        return False
    master = settings.get("spark.master", "").strip()
    if not (master == "local" or master.startswith("local[")):
        return False
    if settings.get("spark.submit.deployMode", "client") != "client":
        return False
    folder = conf_dir(home, env)
    if any(os.path.exists(os.path.join(folder, name)) for name in CONF_FILES):
        return False
    return os.path.isdir(os.path.join(home, "jars")) and java_binary(env) is not None


def launch_key(settings: Mapping[str, str], home: str, env: Mapping[str, str]) -> str:
    """What the driver's command depends on, hashed: the driver, master and deploy-mode settings,
    the environment Spark and Java read, Spark's home and the ``java`` binary (its path and file)."""
    java = java_binary(env) or ""
    real = os.path.realpath(java) if java else ""
    try:
        stat = os.stat(real)
        java_file = [real, stat.st_size, stat.st_mtime_ns]
    except OSError:
        java_file = [real]
    picked = {
        k: v
        for k, v in settings.items()
        if k.startswith("spark.driver.") or k in ("spark.master", "spark.submit.deployMode")
    }
    environment = {k: v for k, v in env.items() if k.startswith(ENV_PREFIXES) or k in ENV_NAMES}
    environment.pop(DIRECT_LAUNCH_ENV, None)
    text = json.dumps([picked, environment, home, java, java_file], sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:24]


def submit_arguments(settings: Mapping[str, str], env: Mapping[str, str]) -> list[str]:
    """The arguments pyspark gives ``spark-submit`` for these settings (``--conf k=v`` each, then
    ``PYSPARK_SUBMIT_ARGS`` or ``pyspark-shell``)."""
    args: list[str] = []
    for key, value in settings.items():
        args += ["--conf", f"{key}={value}"]
    return args + shlex.split(env.get("PYSPARK_SUBMIT_ARGS", "pyspark-shell"))


def script_env(home: str, env: Mapping[str, str]) -> dict[str, str]:
    """What spark-submit's scripts export before the launcher runs (no ``spark-env.sh`` here)."""
    out = {
        "SPARK_HOME": home,
        "PYTHONHASHSEED": "0",
        "SPARK_ENV_LOADED": "1",
        "SPARK_CONF_DIR": conf_dir(home, env),
    }
    if not env.get("SPARK_SCALA_VERSION"):
        two_13 = os.path.isdir(os.path.join(home, "assembly", "target", "scala-2.13"))
        out["SPARK_SCALA_VERSION"] = "2.13" if two_13 else "2.12"
    return out


def parse_launcher_output(output: bytes) -> list[str]:
    """The command Spark's launcher printed: text lines (echoed by spark-class), then a line holding
    one NUL, then the command's words each ended by a NUL."""
    marker = output.find(b"\0\n")
    if marker != 0 and (marker < 0 or output[marker - 1 : marker] != b"\n"):
        raise LaunchCommandError(f"no command in the launcher's output: {output[:200]!r}")
    words = output[marker + 2 :].split(b"\0")
    if words and words[-1] == b"":
        words.pop()
    if not words:
        raise LaunchCommandError("the launcher printed an empty command")
    return [w.decode() for w in words]


def driver_prefix(command: Sequence[str]) -> list[str]:
    """The driver's part of a launcher command: up to and including the ``SparkSubmit`` class."""
    if SUBMIT_CLASS not in command:
        raise LaunchCommandError(f"the launcher's command does not run {SUBMIT_CLASS}")
    return list(command[: list(command).index(SUBMIT_CLASS) + 1])


def build_prefix(settings: Mapping[str, str], home: str, env: Mapping[str, str]) -> list[str]:
    """Run Spark's launcher as spark-class does and return the driver's part of its command."""
    java = java_binary(env)
    if java is None:
        raise LaunchCommandError("no java binary")
    launcher = [
        java,
        "-Xmx128m",
        *shlex.split(env.get("SPARK_LAUNCHER_OPTS", "")),
        "-cp",
        os.path.join(home, "jars", "*"),
        LAUNCHER_CLASS,
        SUBMIT_CLASS,
        *submit_arguments(settings, env),
    ]
    done = subprocess.run(
        launcher,
        env={**env, **script_env(home, env)},
        stdin=subprocess.DEVNULL,
        capture_output=True,
        timeout=LAUNCH_TIMEOUT,
        check=False,
    )
    if done.returncode != 0:
        raise LaunchCommandError(f"Spark's launcher exited with {done.returncode}")
    return driver_prefix(parse_launcher_output(done.stdout))


def render_script(prefix: Sequence[str], home: str, env: Mapping[str, str], key: str) -> str:
    """The shell script that starts the driver: exports, then ``exec <prefix> "$@"``."""
    exports = "".join(f"export {k}={shlex.quote(v)}\n" for k, v in script_env(home, env).items())
    return (
        "#!/bin/sh\n"
        f"# airflow-provider-binlog: the local Spark driver's command from Spark's launcher (key {key})\n"
        f'{exports}exec {" ".join(shlex.quote(word) for word in prefix)} "$@"\n'
    )


def script_dir() -> Path:
    return jars.cache_dir() / "launch"


def driver_script(settings: Mapping[str, str], env: Mapping[str, str] | None = None) -> str | None:
    """The kept start script for these settings (built now when missing), or ``None`` when they are
    not eligible or the launcher did not give a command (then pyspark starts ``spark-submit``)."""
    env = dict(os.environ if env is None else env)
    try:
        home = spark_home()
    except Exception:  # pyspark will say why when it starts the JVM itself
        return None
    if not eligible(settings, home, env):
        return None
    key = launch_key(settings, home, env)
    path = script_dir() / f"driver-{key}.sh"
    if path.exists():
        with contextlib.suppress(OSError):
            os.utime(path)  # the newest used are the ones kept
        return str(path)
    try:
        prefix = build_prefix(settings, home, env)
        _write(path, render_script(prefix, home, env, key))
    except (OSError, subprocess.SubprocessError, LaunchCommandError) as exc:
        log.info("the Spark driver starts through spark-submit: %s", exc)
        return None
    _prune(path.parent)
    return str(path)


def _write(path: Path, text: str) -> None:
    """Write the script atomically, readable by its owner only (``spark.driver.extraJavaOptions``
    may hold what others must not read)."""
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    tmp = path.with_suffix(f".{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o700)
    with os.fdopen(fd, "w") as out:
        out.write(text)
    os.replace(tmp, path)


def forget(script: str) -> None:
    """Remove a kept script (its start failed)."""
    with contextlib.suppress(OSError):
        os.unlink(script)


def _prune(folder: Path) -> None:
    """Keep the newest :data:`KEEP` scripts."""
    try:
        scripts = sorted(folder.glob("driver-*.sh"), key=lambda p: p.stat().st_mtime, reverse=True)
    except OSError:
        return
    for old in scripts[KEEP:]:
        forget(str(old))
