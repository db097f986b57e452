"""A BinlogWatchTrigger run the way Airflow 3.3's triggerer runs it: through a real
:class:`~airflow.triggers.shared_stream.SharedStreamManager` in acknowledgement mode (subscribe,
``filter_shared_stream``, ``bind_pending_event`` as the event leaves the trigger, and
``confirm_persisted`` once "stored", which the triggerer's supervisor does after its database
commit), for ``test_watch_trigger.py``; also a child process a failpoint kills:
``python watch_stream.py KWARGS_JSON POLLS`` (connections from ``AIRFLOW_CONN_*``), which prints
each stored payload as one line: :data:`STORED` and its JSON.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import sys
import time
from collections.abc import Iterator
from typing import Any

from airflow.triggers.shared_stream import SharedStreamManager

from airflow_provider_binlog.canal.watch import Watcher
from airflow_provider_binlog.triggers.watch import BinlogWatchTrigger

TRIGGER_ID = 1
STORED = "stored event: "


class PollCount:
    """Counts finished ``Watcher.poll`` calls (of every watcher of this process), so a run waits
    for polls, not for seconds."""

    def __init__(self) -> None:
        self.done = 0

    @contextlib.contextmanager
    def counting(self) -> Iterator[None]:
        original = Watcher.poll

        def counted(watcher: Watcher) -> Any:
            try:
                return original(watcher)
            finally:
                self.done += 1

        Watcher.poll = counted  # type: ignore[method-assign]
        try:
            yield
        finally:
            Watcher.poll = original  # type: ignore[method-assign]


async def run_stream(
    trigger: BinlogWatchTrigger, count: PollCount, polls: int = 2, timeout: float = 120, on_stored: Any = None
) -> tuple[list[dict[str, Any]], BaseException | None]:
    """The payloads Airflow stored in ``polls`` polls of one trigger run (then it is cancelled and
    unsubscribed, as at a triggerer stop), and the error the trigger ended with, if any."""
    manager = SharedStreamManager()
    key = trigger.shared_stream_key()
    stored: list[dict[str, Any]] = []

    async def consume() -> None:
        stream = manager.subscribe(trigger_id=TRIGGER_ID, trigger=trigger, key=key)
        async for event in trigger.filter_shared_stream(stream):
            seq = manager.bind_pending_event(trigger_id=TRIGGER_ID, key=key)
            assert seq is not None, "the event is not bound to an acknowledgement (no ack mode?)"
            stored.append(event.payload)  # the supervisor stores it ...
            if on_stored is not None:
                on_stored(event.payload)
            manager.confirm_persisted([seq])  # ... and the next state sync tells the runner

    task = asyncio.create_task(consume())
    target = count.done + polls
    deadline = time.monotonic() + timeout
    while count.done < target and not task.done() and time.monotonic() < deadline:
        await asyncio.sleep(0.05)
    task.cancel()
    error: BaseException | None = None
    try:
        await task
    except asyncio.CancelledError:
        pass
    except Exception as exc:
        error = exc
    await manager.unsubscribe(TRIGGER_ID, key)
    await manager.stop_all()
    if error is None:
        assert count.done >= target, f"{count.done} poll(s) in {timeout:g} s, {target} awaited"
    return stored, error


def main() -> None:
    logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(name)s %(levelname)s %(message)s")
    logging.getLogger("kazoo").setLevel(logging.WARNING)
    count = PollCount()
    trigger = BinlogWatchTrigger(**json.loads(sys.argv[1]))

    def show(payload: dict[str, Any]) -> None:
        print(STORED + json.dumps(payload), flush=True)

    with count.counting():
        asyncio.run(run_stream(trigger, count, int(sys.argv[2]), on_stored=show))


if __name__ == "__main__":
    main()
