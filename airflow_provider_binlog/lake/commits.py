"""Exactly-once bookkeeping in Iceberg snapshot summaries.

Every commit the merge makes carries these snapshot summary properties:

==============================  ====================================================================
``binlog-cdc.destination``      the destination (subscription) whose changes the commit applied
``binlog-cdc.order-key``        ``file_number:pos:payload_index:row_index`` of the last entry applied
                                by this commit (inclusive); entries at or before it are skipped
``binlog-cdc.position``         ``file:pos`` of the event holding that entry
``binlog-cdc.end-position``     the batch's end position (set on the commit that completes a batch)
``binlog-cdc.gtid``             GTID of the last entry's transaction, when known
``binlog-cdc.interval-*``       a run for an interval (``stop_at`` a timestamp or
                                ``data_interval_end``): ``interval-start``/``interval-end`` (``file:pos``
                                after the last transaction before each end), ``-gtid`` (the GTID
                                position there), ``-time`` (that transaction's commit time, ISO) and
                                ``interval-until`` (the instant the interval ends); on every commit of
                                the run (:func:`run_properties`, see :mod:`..drain.interval`)
==============================  ====================================================================

**The mark tag.** Every marked commit of destination ``D`` to a table moves the Iceberg tag
:func:`mark_tag` (``binlog-cdc-mark-D``, no max-ref-age: kept forever) to the snapshot carrying the
mark: in the same transaction where the driver commits through Iceberg's API
(:func:`commit_tagged`: :mod:`.file_append`'s appends and overwrites, a DDL step's empty mark
commit), right after where Spark commits (:func:`commit`, :func:`move_tag`: a MERGE, the driver's
row delta of :mod:`.position_delta`, Spark's INSERT). Iceberg's ``expire_snapshots`` never expires
a snapshot a tag holds (whatever ``retain_last`` or ``older_than``), so neither it nor
``rewrite_data_files``, ``rewrite_position_delete_files``, ``rewrite_manifests`` or
``remove_orphan_files`` (the tagged snapshot's files stay reachable) can take the mark away, at any
moment, a crash and its retry included. The cost (``tests/lake/test_mark_tags.py``, local Hadoop
catalog, 2 cores): one more metadata commit after each Spark commit, 10-18 ms; nothing measurable
inside the driver's transaction, then 6-10 ms for :func:`move_tag` to see the tag is there.

Reading (:class:`MarkState`, one py4j call, ``MarkReader.read``): walk the current snapshot's
ancestry back to the tagged snapshot (not further: the cost does not grow with history; other
writers' commits lie in between); the mark is the newest snapshot of ``D`` found on the way (one
Spark committed whose run stopped before the tag moved: the run's start moves the tag there), else
the tagged snapshot's. Then:

* the walk met an expired snapshot before the tagged one (``gap``): the tagged snapshot is taken as
  an ancestor and its mark holds;
* the tagged snapshot is not an ancestor (``diverged``: the walk passed below its sequence number,
  reached the table's first snapshot, or met an expired one that is the tagged one's ancestor): a
  human rolled the table back to before it, so the table no longer holds changes the cursor
  passed: :class:`MarkDivergedError` names the table, the tag and the remedy, a table re-snapshot
  (``binlog-cdc resnapshot``; its swap moves the tag). Not seen: a rollback followed by other
  writers' commits and an expiry of both the snapshot rolled back to and the commit after it,
  all before the next run (indistinguishable from a gap by the metadata left);
* no tag but a mark in the ancestry (tables of earlier versions): the run's start creates the
  tag there (logged once);
* neither, the table holding rows: an append-only target stops (:class:`MarkMissingError`: never a
  silent second copy of its changes); a keyed one takes its changes from the cursor again
  (idempotent) and logs a warning.

**Append-only inserts Spark commits** (the driver could not write the file, :mod:`.file_append`):
their tag cannot ride on Spark's commit, so before it the insert's order key is recorded in the
table property :data:`INTENT_PREFIX` + ``D`` (:func:`record_intent`, one metadata commit). When a
run's start finds that intent past the mark and its walk did not see every snapshot back to the
tag (expiry removed the insert's snapshot, if it landed, with the others), the target stops
(:class:`MarkMissingError`) rather than guess; an intact walk sees whether it landed. (A keyed
target's Spark commit in the same window at worst has its changes applied again: idempotent.)

The properties ride on ``org.apache.iceberg.spark.CommitMetadata``'s thread-local: set just around
the statement (py4j pins each Python thread to one JVM thread, where the commit runs) and removed
in ``finally``. This needs the classic py4j gateway, not Spark Connect.

Concurrent writers (:func:`commit`, the one place every marked statement commits through): Iceberg
retries a commit that lost the race for the catalog's pointer by itself, but a MERGE, DELETE,
UPDATE or overwrite whose rows another writer changed after it read the table fails validation
(``ValidationException``, or ``CommitFailedException`` once Iceberg's own retries are spent), and a
catalog that lost its connection mid-commit cannot say whether the commit landed
(``CommitStateUnknownException``). :func:`commit` then reads the table's newest snapshot of the
destination again: one carrying exactly the statement's properties means it landed (not run again);
so does a mark past it (a consumer that took the destination over while this one was cut off
applied it: running it again would put older row images over newer ones); otherwise it refreshes
the table and runs the statement again, with the same properties, up to
:attr:`CommitRetry.attempts` times with exponential backoff. A conflict past that raises
:class:`CommitConflictError` naming the table and the changes' ``file:pos`` range; the cursor
stays before them. Failpoint ``lake_commit``: before each attempt.

A Spark catalog with ``cache-enabled`` (Iceberg's default) plans a statement on the table as this
session last loaded or refreshed it, so another writer's commit since then is such a conflict too.
"""

from __future__ import annotations

import contextlib
import json
import logging
import random
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from airflow_provider_binlog.binlog.position import BinlogPosition
from airflow_provider_binlog.canal.change import OrderKey
from airflow_provider_binlog.errors import BinlogCdcError
from airflow_provider_binlog.faults import failpoint
from airflow_provider_binlog.lake import settings
from airflow_provider_binlog.lake.errors import LakeError, LakeStatementError
from airflow_provider_binlog.lake.spark import jvm_helpers, jvm_log
from airflow_provider_binlog.lake.spark.java_classes import java_class, java_private_static, java_static

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

PREFIX = "binlog-cdc."
DESTINATION = PREFIX + "destination"
ORDER_KEY = PREFIX + "order-key"
POSITION = PREFIX + "position"
END_POSITION = PREFIX + "end-position"
GTID = PREFIX + "gtid"
INTENT_PREFIX = PREFIX + "intent."
"""Table property ``binlog-cdc.intent.<destination>``: the order key a commit Spark makes into an
append-only table is about to mark (set before it; see the module docstring)."""
MARK_TAG_PREFIX = "binlog-cdc-mark-"
MAX_DEPTH = 10_000


def mark_tag(destination: str) -> str:
    """The Iceberg tag that keeps ``destination``'s newest marked snapshot of a table."""
    return MARK_TAG_PREFIX + destination


log = logging.getLogger(__name__)

_RUN_PROPERTIES: dict[str, dict[str, str]] = {}  # destination -> properties of its run's commits
_RUN_LOCK = threading.Lock()
_OBSERVERS: dict[str, Callable[[str, float], None]] = {}  # destination -> told each commit's seconds


@contextlib.contextmanager
def observe_commits(destination: str, observer: Callable[[str, float], None]) -> Iterator[None]:
    """Inside the block, every :func:`commit` of ``destination`` that ran to its end (or had
    landed) calls ``observer(target, seconds)`` (the quoted name; seconds from its first attempt,
    retries included), on the committing thread; an observer that raises is logged, not raised."""
    with _RUN_LOCK:
        _OBSERVERS[destination] = observer
    try:
        yield
    finally:
        with _RUN_LOCK:
            _OBSERVERS.pop(destination, None)


def _observe(properties: Mapping[str, str], target: str, started: float) -> None:
    with _RUN_LOCK:
        observer = _OBSERVERS.get(properties.get(DESTINATION, ""))
    if observer is not None:
        try:
            observer(target, time.monotonic() - started)
        except Exception as exc:
            log.warning("commit observer of %s failed: %s: %s", target, type(exc).__name__, exc)


@contextlib.contextmanager
def run_properties(destination: str, properties: Mapping[str, str]) -> Iterator[None]:
    """Inside the block, every mark of ``destination`` (:func:`mark_properties`) also carries
    ``properties`` (names under :data:`PREFIX`; the mark's own keys win)."""
    with _RUN_LOCK:
        _RUN_PROPERTIES[destination] = dict(properties)
    try:
        yield
    finally:
        with _RUN_LOCK:
            _RUN_PROPERTIES.pop(destination, None)


@dataclass(frozen=True, slots=True)
class CommittedMark:
    """What a table holds for one destination.

    :param order_key: the last entry applied (inclusive).
    :param position: the event position of that entry.
    :param end_position: the end position of the last completed batch, if the newest commit completed one.
    :param gtid: GTID of the last applied transaction, if known.
    :param snapshot_id: the Iceberg snapshot carrying the mark.
    """

    order_key: OrderKey
    position: BinlogPosition | None
    end_position: BinlogPosition | None
    gtid: str | None
    snapshot_id: int

    def covers(self, key: OrderKey) -> bool:
        """True when the entry with this order key is already in the table."""
        return tuple(key) <= tuple(self.order_key)


def format_order_key(key: OrderKey) -> str:
    return ":".join(str(int(x)) for x in key)


def parse_order_key(text: str) -> OrderKey:
    parts = text.split(":")
    if len(parts) != 4:
        raise LakeError(f"invalid {ORDER_KEY} snapshot property {text!r}")
    return OrderKey(*(int(p) for p in parts))


def mark_properties(
    destination: str,
    order_key: OrderKey,
    position: BinlogPosition | None,
    end_position: BinlogPosition | None,
    gtid: str | None,
) -> dict[str, str]:
    """The snapshot properties of one commit."""
    with _RUN_LOCK:
        extra = _RUN_PROPERTIES.get(destination, {})
    props = {**extra, DESTINATION: destination, ORDER_KEY: format_order_key(order_key)}
    if position is not None:
        props[POSITION] = str(position)
    if end_position is not None:
        props[END_POSITION] = str(end_position)
    if gtid:
        props[GTID] = gtid
    return props


def _mark_from_summary(summary: Mapping[str, str], snapshot_id: int) -> CommittedMark:
    pos = summary.get(POSITION)
    end = summary.get(END_POSITION)
    return CommittedMark(
        order_key=parse_order_key(summary[ORDER_KEY]),
        position=BinlogPosition.parse(pos) if pos else None,
        end_position=BinlogPosition.parse(end) if end else None,
        gtid=summary.get(GTID) or None,
        snapshot_id=snapshot_id,
    )


def load_iceberg_table(spark: SparkSession, name: str) -> Any | None:
    """Return the JVM ``org.apache.iceberg.Table`` for a quoted multi-part name, or ``None`` if absent."""
    from py4j.protocol import Py4JJavaError
    from pyspark.errors import AnalysisException

    from airflow_provider_binlog.lake.spark.session import activate

    activate(spark)  # Spark3Util resolves the catalog through the thread's active session
    load = java_static(spark, "org.apache.iceberg.spark.Spark3Util", "loadIcebergTable")
    try:
        return load(spark._jsparkSession, name)
    except AnalysisException as exc:
        if exc.getErrorClass() in ("TABLE_OR_VIEW_NOT_FOUND", "SCHEMA_NOT_FOUND"):
            return None
        raise
    except Py4JJavaError as exc:
        if "NoSuchTableException" in str(exc.java_exception.getClass().getName()):
            return None
        raise


def read_mark(
    spark: SparkSession, name: str, destination: str, max_depth: int = MAX_DEPTH
) -> CommittedMark | None:
    """Return the table's committed mark for ``destination``, or ``None`` (no table or no mark).

    :param name: quoted multi-part table name (see :func:`..sql.quote_parts`).
    """
    table = load_iceberg_table(spark, name)
    return None if table is None else mark_of(spark, table, destination, max_depth)


def mark_of(
    spark: SparkSession, table: Any, destination: str, max_depth: int = MAX_DEPTH
) -> CommittedMark | None:
    """Return the committed mark for ``destination`` of a loaded JVM Iceberg table, or ``None``, as
    the module docstring says (the tag and the ancestry; the table refreshed first; at most
    ``max_depth`` snapshots walked). Nothing is written: a table rolled back to before its tag
    answers the newest mark of its current ancestry. One py4j call (:func:`.jvm_helpers.mark_reader`)."""
    return MarkState.read(spark, table, destination, max_depth).mark


class MarkDivergedError(LakeError):
    """The snapshot a destination's mark tag holds is not an ancestor of the table's current one."""


class MarkMissingError(LakeError):
    """An append-only table holds rows but no mark of the destination (nor the tag)."""


@dataclass(frozen=True, slots=True)
class MarkState:
    """What a table says of one destination's mark (see the module docstring).

    :param mark: the committed mark (``None``: none).
    :param state: ``tagged``, ``gap``, ``diverged``, ``untagged`` or ``none`` (``MarkReader.read``).
    :param tag_snapshot: the snapshot the tag holds (after ``adopt``), or ``None``.
    :param rows: the table's current snapshot holds rows.
    :param intact: the walk saw every snapshot back to the tagged one (or the first).
    :param moved: this read created or moved the tag.
    :param properties: the table's properties.
    """

    mark: CommittedMark | None
    state: str
    tag_snapshot: int | None
    rows: bool
    intact: bool
    moved: bool
    properties: dict[str, str]

    @classmethod
    def read(
        cls,
        spark: SparkSession,
        table: Any,
        destination: str,
        max_depth: int = MAX_DEPTH,
        adopt: bool = False,
    ) -> MarkState:
        """Read it (one py4j call); with ``adopt``, move the tag to a newer mark of the ancestry
        (or create it) unless the table diverged."""
        reader = jvm_helpers.mark_reader(spark, table)
        tag = mark_tag(destination)
        found = json.loads(reader.read(table, destination, DESTINATION, ORDER_KEY, tag, max_depth, adopt))
        mark = found["mark"]
        tagged = found["tag-snapshot"]
        return cls(
            mark=None if mark is None else _mark_from_json(mark),
            state=str(found["state"]),
            tag_snapshot=None if tagged is None else int(tagged),
            rows=bool(found["rows"]),
            intact=bool(found["intact"]),
            moved=bool(found["moved"]),
            properties=dict(found["properties"]),
        )


def move_tag(
    spark: SparkSession, target: str, properties: Mapping[str, str], max_depth: int = MAX_DEPTH
) -> None:
    """After a marked commit Spark made to ``target``: move the destination's tag to the newest
    snapshot of the destination in the table's ancestry (nothing written when the tag is there
    already, as after a commit :func:`commit_tagged` made). One table load and one py4j call."""
    destination = properties.get(DESTINATION)
    if not destination or not properties.get(ORDER_KEY):
        return
    table = load_iceberg_table(spark, target)
    if table is None:
        return
    reader = jvm_helpers.mark_reader(spark, table)
    reader.moveTag(table, destination, DESTINATION, ORDER_KEY, mark_tag(destination), max_depth)


def record_intent(spark: SparkSession, target: str, properties: Mapping[str, str]) -> None:
    """Before Spark commits ``properties`` to an append-only ``target``: keep their order key in the
    table property ``binlog-cdc.intent.<destination>`` (see the module docstring). One metadata
    commit, none when the property says so already."""
    destination, key = properties.get(DESTINATION), properties.get(ORDER_KEY)
    table = load_iceberg_table(spark, target)
    if not destination or not key or table is None:
        return
    name = INTENT_PREFIX + destination
    table.refresh()
    if table.properties().get(name) != key:
        table.updateProperties().set(name, key).commit()


TAGGED_ATTEMPTS = 6
"""Transactions :func:`commit_tagged` makes at most when the catalog's pointer moved under one."""


def commit_tagged(
    spark: SparkSession, table: Any, build: Callable[[Any], None], properties: Mapping[str, str]
) -> None:
    """Commit one operation to ``table`` in a new JVM Iceberg ``Transaction`` with ``properties`` on
    its snapshot, the destination's tag moved to that snapshot in the same transaction (a mark
    without a destination: the operation alone). One py4j call for the commit.

    :param build: adds the operation to the transaction it is given and commits it there.

    Iceberg's own retry of a transaction that lost the race for the catalog's pointer cannot carry
    a tag move (the move is planned on the metadata it started from), so such a commit fails with
    ``CommitFailedException`` having changed nothing; it is built again on the table as it is now,
    up to :data:`TAGGED_ATTEMPTS` times (the operation's own checks, e.g. an overwrite's
    validation from its snapshot, run again in each)."""
    destination = properties.get(DESTINATION)
    tag = mark_tag(destination) if destination and properties.get(ORDER_KEY) else None
    attempt = 0
    while True:
        attempt += 1
        transaction = table.newTransaction()
        build(transaction)
        try:
            if tag is None:
                transaction.commitTransaction()
            else:
                jvm_helpers.mark_reader(spark, table).commitTagged(transaction, tag)
            return
        except Exception as exc:
            causes = java_causes(exc)
            lost = "org.apache.iceberg.exceptions.CommitFailedException" in causes and not any(
                name in causes
                for name in (
                    "org.apache.iceberg.exceptions.ValidationException",
                    "org.apache.iceberg.exceptions.CommitStateUnknownException",
                )
            )
            if not lost or attempt >= TAGGED_ATTEMPTS:
                raise
            table.refresh()


def _where(mark: CommittedMark | None) -> str:
    if mark is None:
        return "nothing"
    return f"order key {format_order_key(mark.order_key)} ({mark.position or 'no position'})"


def _mark_from_json(found: Mapping[str, Any]) -> CommittedMark:
    return _mark_from_summary(found["summary"], int(found["snapshot-id"]))


@contextlib.contextmanager
def commit_properties(spark: SparkSession, properties: Mapping[str, str]) -> Iterator[None]:
    """Attach ``properties`` to every Iceberg commit this thread makes inside the block."""
    # Iceberg's per-thread commit properties (a static ThreadLocal: found once per JVM)
    local = java_private_static(spark, "org.apache.iceberg.spark.CommitMetadata", "COMMIT_PROPERTIES")
    jmap = java_class(spark, "java.util.HashMap")()
    for k, v in properties.items():
        jmap.put(k, v)
    local.set(jmap)
    try:
        yield
    finally:
        local.remove()


class Marks:
    """The committed marks of one destination's targets as one merger knows them: read from a
    table once, then moved on by the merger's own commits.

    :param spark: the session.
    :param destination: whose marks.
    :param found: told each target whose table exists when its mark is first read (``set.add``).
    """

    def __init__(
        self,
        spark: SparkSession,
        destination: str,
        found: Callable[[str], None],
        append_only: Callable[[str], bool] | None = None,
        display: Callable[[str], str] | None = None,
    ) -> None:
        self.spark = spark
        self.destination = destination
        self._found = found
        self._append_only = append_only or (lambda _target: False)
        self._display = display or (lambda target: target)
        self.known: dict[str, CommittedMark | None] = {}
        """Target (quoted name) -> its mark (``None``: no table or no mark), for targets read so far."""

    def get(self, target: str) -> CommittedMark | None:
        """The target's mark, read from its table the first time (:meth:`load`)."""
        known = self.known
        if target not in known:
            self.load(target)
        return known[target]

    def load(self, target: str) -> dict[str, str] | None:
        """Read the target's mark from its table now, with the table's properties; return the
        properties (``None``: there is no table). One table load and one py4j call."""
        table = load_iceberg_table(self.spark, target)
        if table is None:
            self.known[target] = None
            return None
        self._found(target)
        state = MarkState.read(self.spark, table, self.destination, adopt=True)
        self.known[target] = self._checked(target, state)
        return state.properties

    def _checked(self, target: str, state: MarkState) -> CommittedMark | None:
        """The mark a run may fold against, or a stop (see the module docstring: where the lake
        cannot be exact, it says so)."""
        display, destination, mark = self._display(target), self.destination, state.mark
        tag = mark_tag(destination)
        remedy = (
            f"re-snapshot the table from its source (binlog-cdc resnapshot --destination {destination} "
            f"--table <source schema.table> --target {display} ...; the tag moves to its swap), then run "
            "the task again"
        )
        if state.state == "diverged":
            raise MarkDivergedError(
                f"{display}: the snapshot tagged {tag!r} ({state.tag_snapshot}) is not an ancestor of the "
                "table's current snapshot: the table was rolled back to before it, so it no longer holds "
                f"changes the cursor of destination {destination!r} has passed (its current ancestry is "
                f"marked at {_where(mark)}); {remedy}"
            )
        if state.moved and state.state == "untagged":
            log.info(
                "%s: marked snapshot %s of %s now kept by tag %r",
                display,
                state.tag_snapshot,
                destination,
                tag,
            )
        elif state.moved:
            log.info(
                "%s: tag %r moved to the newer mark at %s (the last run stopped before moving it)",
                display, tag, _where(mark),
            )  # fmt: skip
        append_only = self._append_only(target)
        if state.state == "none" and state.rows:
            if append_only:
                raise MarkMissingError(
                    f"{display} holds rows but no mark of destination {destination!r} (no tag {tag!r} and "
                    "no marked snapshot in its history: removed by a tool outside this product?): an "
                    "append-only table cannot take changes again without holding some twice; "
                    f"{remedy}, or route the destination to a new table"
                )
            log.warning(
                "%s holds rows but no mark of destination %s (no tag %r): its changes from the cursor "
                "are applied again (a keyed table absorbs them)",
                display, destination, tag,
            )  # fmt: skip
        intent = state.properties.get(INTENT_PREFIX + destination)
        if (
            append_only
            and intent
            and not state.intact
            and (mark is None or not mark.covers(parse_order_key(intent)))
        ):
            raise MarkMissingError(
                f"{display}: an insert of destination {destination!r} up to order key {intent} was being "
                f"committed when a run stopped, and snapshots expired since hide whether it landed (the "
                f"mark says {_where(mark)}): an append-only table cannot take those changes again "
                f"safely; {remedy}"
            )
        return mark

    def read(self, target: str) -> CommittedMark | None:
        """The target's mark read from its table now (not cached, but remembered)."""
        mark = read_mark(self.spark, target, self.destination)
        self.known[target] = mark
        return mark

    def put(self, target: str, mark: CommittedMark) -> None:
        """The target committed up to ``mark``."""
        self.known[target] = mark


# ---- commits that lose a race to another writer ------------------------------------------------------

CONFLICTS = (
    "org.apache.iceberg.exceptions.ValidationException",
    "org.apache.iceberg.exceptions.CommitFailedException",
    "org.apache.iceberg.exceptions.CommitStateUnknownException",
)
"""Java exceptions (anywhere in the cause chain) that make :func:`commit` check and retry."""

RETRY_ENV = settings.env_name("commit_retry")


class CommitConflictError(LakeError):
    """A commit kept conflicting with other writers past :attr:`CommitRetry.attempts`."""


@dataclass(frozen=True, slots=True)
class CommitRetry:
    """How :func:`commit` retries a conflicting commit.

    :param attempts: runs of the statement at most (1: no retry).
    :param wait: seconds before the second attempt; doubled each time, up to ``max_wait``, each
        wait drawn between half and all of it (two writers that collided do not collide again in
        step).
    :param max_wait: the longest wait.
    """

    attempts: int = 6
    wait: float = 0.5
    max_wait: float = 15.0

    def __post_init__(self) -> None:
        if self.attempts < 1 or self.wait < 0 or self.max_wait < 0:
            raise ValueError(f"{self}: attempts >= 1, waits >= 0")

    def delay(self, attempt: int) -> float:
        """Seconds to wait after failed attempt ``attempt`` (from 1)."""
        full = min(self.max_wait, self.wait * 2 ** (attempt - 1))
        return full * random.uniform(0.5, 1.0)

    @classmethod
    def parse(cls, text: str) -> CommitRetry:
        """``attempts=8,wait=0.5,max_wait=20`` (any of them; the rest default)."""
        kwargs: dict[str, Any] = {}
        for item in filter(None, (x.strip() for x in text.split(","))):
            key, _, value = item.partition("=")
            key = key.strip()
            if key not in ("attempts", "wait", "max_wait"):
                raise ValueError(f"{RETRY_ENV}: unknown setting {key!r} (attempts, wait, max_wait)")
            kwargs[key] = int(value) if key == "attempts" else float(value)
        return cls(**kwargs)

    @classmethod
    def default(cls) -> CommitRetry:
        """The defaults, or what ``$BINLOG_CDC_COMMIT_RETRY`` says."""
        text = settings.current().commit_retry
        return cls.parse(text) if text else cls()


_counter_lock = threading.Lock()
conflicts_retried = 0
"""Conflicts :func:`commit` retried in this process (for tests and benchmarks)."""


def java_causes(exc: BaseException, depth: int = 20) -> list[str]:
    """The Java class names of a Spark/py4j error's cause chain, outermost first (at most
    ``depth``; empty for an error that holds no JVM exception)."""
    java = getattr(exc, "java_exception", None) or getattr(exc, "_origin", None)
    names: list[str] = []
    while java is not None and len(names) < depth:
        try:
            names.append(str(java.getClass().getName()))
        except Exception:  # not a JVM object after all
            break
        java = java.getCause()
    return names


def conflict_class(exc: BaseException) -> str | None:
    """The Iceberg conflict (one of :data:`CONFLICTS`) behind a Spark/py4j error, or ``None``."""
    found = next((name for name in java_causes(exc) if name in CONFLICTS), None)
    if found is not None:
        return found
    text = str(exc)
    return next((name for name in CONFLICTS if name in text), None)


def landed(table: Any, properties: Mapping[str, str], max_depth: int = 10_000) -> bool:
    """Whether the table holds the commit of ``properties`` already: the newest snapshot of their
    destination carries exactly ``properties`` (the commit that raised landed after all), or, for
    a commit that is no re-snapshot swap, a mark at or past theirs (a consumer that took the
    destination over while this one was cut off applied it). The table is refreshed first."""
    destination = properties.get(DESTINATION)
    key = properties.get(ORDER_KEY)
    swap = any(k.startswith(PREFIX + "resnapshot") for k in properties)
    table.refresh()
    snap = table.currentSnapshot()
    depth = 0
    while snap is not None and depth < max_depth:
        summary = snap.summary()
        if summary.get(DESTINATION) == destination and summary.get(ORDER_KEY):
            if all(summary.get(k) == v for k, v in properties.items()):
                return True
            return (
                not swap
                and key is not None
                and parse_order_key(summary.get(ORDER_KEY)) >= parse_order_key(key)
            )
        parent = snap.parentId()
        snap = table.snapshot(parent) if parent is not None else None
        depth += 1
    return False


def _jvm_stopped() -> str:
    """What stopped the driver JVM, when it reported an error that stops it (else nothing): Spark's
    own error then only says its context was shut down."""
    found = jvm_log.fatal()
    if found is None:
        return ""
    return (
        f". The Spark driver JVM stopped on {found}: give it more memory (spark.driver.memory; for "
        "direct buffer memory -XX:MaxDirectMemorySize in spark.driver.extraJavaOptions) or commit "
        "smaller chunks (max_rows_per_commit), then run the task again"
    )


def commit(
    spark: SparkSession,
    target: str,
    properties: Mapping[str, str],
    statement: Callable[[], Any],
    changes: str = "",
    attach: bool = True,
    retry: CommitRetry | None = None,
) -> bool:
    """Run ``statement`` (a Spark statement committing to ``target``) with ``properties`` on its
    commit, retrying a conflict with another writer (see the module docstring).

    :param target: the table's quoted name.
    :param properties: the commit's snapshot properties (:func:`mark_properties`): its mark.
    :param changes: what the commit applies, for a persisting conflict's message (``file:pos`` range).
    :param attach: attach ``properties`` to every commit of ``statement`` (``False``: the statement
        writes its mark itself, as a DDL statement's actions do).
    :param retry: the bounds (default :meth:`CommitRetry.default`).
    :return: ``True`` when the statement ran to its end, ``False`` when a conflicting attempt had
        landed after all (so ``statement`` did not finish: its counts are unknown).
    :raises CommitConflictError: the conflict persisted past ``retry.attempts``.
    :raises LakeStatementError: Spark failed otherwise (the table, ``changes`` and the first line of
        Spark's message; Spark's error is the cause).
    """
    global conflicts_retried
    policy = retry or CommitRetry.default()
    attempt = 0
    started = time.monotonic()
    while True:
        attempt += 1
        failpoint("lake_commit")
        try:
            if attach:
                with commit_properties(spark, properties):
                    statement()
            else:
                statement()
            failpoint("mark_tag")  # the crash tests stop here: committed, a Spark commit's tag not moved
            move_tag(spark, target, properties)
            _observe(properties, target, started)
            return True
        except Exception as exc:
            conflict = conflict_class(exc)
            if conflict is None:
                if isinstance(exc, BinlogCdcError):
                    raise  # ours already (a DDL action's SchemaEvolutionError, a failpoint...)
                raise LakeStatementError(
                    f"commit to {target} (changes {changes or 'unknown'}) failed in Spark: "
                    f"{type(exc).__name__}: {_first_line(exc)}; the cursor stays before these changes"
                    f"{_jvm_stopped()}"
                ) from exc
            short = conflict.rsplit(".", 1)[-1]
            table = load_iceberg_table(spark, target)
            if table is not None and landed(table, properties):
                log.warning(
                    "commit to %s raised %s but landed (changes %s): not applied again",
                    target,
                    short,
                    changes,
                )
                _refresh(spark, target)
                move_tag(spark, target, properties)
                _observe(properties, target, started)
                return False
            if attempt >= policy.attempts:
                raise CommitConflictError(
                    f"commit to {target} (changes {changes or 'unknown'}) still conflicts with another "
                    f"writer after {attempt} attempts ({short}: {_first_line(exc)}); nothing of it is in "
                    "the table and the cursor stays before it: run the task again, or raise "
                    f"{RETRY_ENV} attempts"
                ) from exc
            pause = policy.delay(attempt)
            with _counter_lock:
                conflicts_retried += 1
            log.warning(
                "commit conflict on %s (changes %s): %s, attempt %d of %d; retrying in %.1f s",
                target, changes, short, attempt, policy.attempts, pause,
            )  # fmt: skip
            time.sleep(pause)
            _refresh(spark, target)


def _refresh(spark: SparkSession, target: str) -> None:
    """Make the session plan the next statement on the table as the catalog has it now."""
    table = load_iceberg_table(spark, target)
    if table is not None:
        table.refresh()
    with contextlib.suppress(Exception):  # a dropped table: nothing cached to refresh
        spark.catalog.refreshTable(target)


def _first_line(exc: BaseException) -> str:
    java = getattr(exc, "java_exception", None)
    text = str(java.getMessage()) if java is not None else str(exc)
    return (text.strip().splitlines() or [""])[0][:300]
