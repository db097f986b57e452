"""Failpoint rules (:mod:`airflow_provider_binlog.faults`): the spec grammar, the n-th hit, a timed
kill that lands wherever the process is (or at a later hit's kill, whichever comes first), and hit
counting across threads. Kills run in a child process (they SIGKILL it)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator

import pytest

from airflow_provider_binlog import faults
from airflow_provider_binlog.faults import ENV, KILL_MARK, InjectedFault, Rule, failpoint, parse


@pytest.fixture(autouse=True)
def _fresh() -> Iterator[None]:
    faults.reset()
    yield
    faults.reset()


@pytest.mark.parametrize(
    ("spec", "rules"),
    [
        ("after_commit=kill", {"after_commit": Rule("kill", 1)}),
        ("after_commit", {"after_commit": Rule("kill", 1)}),
        (" before_commit=raise@2 , ack=kill@3,", {"before_commit": Rule("raise", 2), "ack": Rule("kill", 3)}),
        ("drain=kill@1+1.5,after_ack=kill@3", {"drain": Rule("kill", 1, 1.5), "after_ack": Rule("kill", 3)}),
        ("drain=kill@1+0", {"drain": Rule("kill", 1, 0.0)}),
    ],
)
def test_parse(spec: str, rules: dict[str, Rule]) -> None:
    assert parse(spec) == rules


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("x=raise@2+1", "needs the kill action"),
        ("x=kill@0", "counts from 1"),
        ("x=kill@1+-2", "counts from 1"),
        ("x=kill@1+nan", "counts from 1"),
        ("x=kill@two", "invalid literal"),
    ],
)
def test_parse_rejects(spec: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        parse(spec)


def test_rule_text_round_trips() -> None:
    for spec in ("kill@1", "raise@4", "kill@3+1.5"):
        assert str(parse(f"x={spec}")["x"]) == spec


def test_off_without_the_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(ENV, raising=False)
    for _ in range(3):
        failpoint("before_commit")


def test_raise_at_the_nth_hit_only(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ENV, "before_commit=raise@3,ack=raise")
    failpoint("drain")  # no rule: not counted, nothing happens
    failpoint("before_commit")
    failpoint("before_commit")
    with pytest.raises(InjectedFault, match=r"failpoint before_commit \(raise@3\)"):
        failpoint("before_commit")
    failpoint("before_commit")  # past the n-th hit
    with pytest.raises(InjectedFault, match=r"failpoint ack \(raise@1\)"):
        failpoint("ack")


def test_hits_are_counted_across_threads(monkeypatch: pytest.MonkeyPatch) -> None:
    """Exactly one of 8 x 250 hits from 8 threads is the 1000th (a lost count would skip it)."""
    monkeypatch.setenv(ENV, "merge_table=raise@1000")
    raised = []
    start = threading.Barrier(8)

    def hit() -> None:
        start.wait()
        for _ in range(250):
            try:
                failpoint("merge_table")
            except InjectedFault:
                raised.append(1)

    threads = [threading.Thread(target=hit) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    assert len(raised) == 1


def _child(spec: str, script: str) -> subprocess.CompletedProcess[str]:
    code = f"from airflow_provider_binlog.faults import failpoint\nimport time\n{script}"
    env = {**os.environ, ENV: spec}
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)


def _landed(proc: subprocess.CompletedProcess[str]) -> str:
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    marks = [line for line in proc.stderr.splitlines() if line.startswith(KILL_MARK)]
    assert len(marks) == 1, proc.stderr
    return marks[0][len(KILL_MARK) :]


def test_kill_at_the_nth_hit() -> None:
    proc = _child("ack=kill@2", "for i in range(3):\n    print(i, flush=True)\n    failpoint('ack')\n")
    assert proc.stdout.split() == ["0", "1"]
    assert _landed(proc) == "ack@2 (kill@2)"


def test_a_timed_kill_lands_where_the_process_is() -> None:
    """The timer fires while the main thread sleeps, far from any failpoint."""
    proc = _child(
        "drain=kill@2+0.3",
        "failpoint('drain'); failpoint('drain'); print('armed', flush=True)\n"
        "for _ in range(100):\n    time.sleep(0.1)\nprint('ended', flush=True)\n",
    )
    assert proc.stdout.split() == ["armed"]
    assert _landed(proc) == "a timer 0.3 s after drain@2 (kill@2+0.3)"


def test_a_later_kill_lands_when_it_comes_before_the_timer() -> None:
    proc = _child(
        "drain=kill@1+30,after_ack=kill@2",
        "failpoint('drain'); failpoint('after_ack'); print('timer running', flush=True)\n"
        "failpoint('after_ack'); print('ended', flush=True)\n",
    )
    assert proc.stdout.split() == ["timer", "running"]
    assert _landed(proc) == "after_ack@2 (kill@2)"
