"""Claim work for idle executors only, and run each claimed record at once on its own executor.

A :class:`Producer` serves one lane in one process. It owns the lane's executor threads (as
many as the lane's workers) and claims, in ONE statement (P1-P5, each record with its own
token), at most as many records as it has idle executors: each claimed record starts at once,
and no record waits in memory behind another's step. Such a claim is its step's start: it
carries the stage's full lease and the start mark (``step_started_at``), so its lapse is a lost
worker (D18).

``[pipeline] prefetch`` (default 0) lets it claim that many records more, to hand over the moment
an executor is free. A prefetched claim is *not started*: it holds the record for
:data:`PREFETCH_HOLD` seconds only, and its step's start (:func:`~conveyor.pipeline.queries.
mark_started`) gives it the stage's full lease from then. A process that dies holding
prefetched records thus keeps them from other workers for about a second, not a lease.

On stop, the producer claims no more and releases what no executor has started, at once.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from sqlalchemy import Connection, Engine, Row, Select, Update
from sqlalchemy.sql import ColumnElement

from conveyor.db import outage
from conveyor.db.engine import autocommit
from conveyor.db.notify import Notifier, announce_work
from conveyor.pipeline import queries
from conveyor.pipeline.claims import Claim, Held
from conveyor.pipeline.stages import Domain

if TYPE_CHECKING:
    from conveyor.pipeline.completer import Finished

__all__ = [
    "PREFETCH_HOLD",
    "STATS_RECHECK",
    "Job",
    "LaneClaims",
    "Producer",
    "claim_jobs",
    "records_of",
]

log = logging.getLogger("conveyor.pool")

PREFETCH_HOLD = 1.0
"""Seconds a prefetched (not started) claim holds its record before others may take it."""

# Seconds after a prefetched claim's lapse before looking (the lapse must be past on the
# database's clock too).
_HOLD_MARGIN = 0.02

STATS_RECHECK = 10.0
"""Seconds between looks for a PostgreSQL table's first statistics (see
:meth:`LaneClaims.needs_no_sort`)."""

# Seconds the producer backs off after its database failed.
_ERROR_BACKOFF = 1.0


@dataclass(slots=True)
class Job:
    """A claimed record on its way to an executor.

    Attributes:
        domain: the record's domain.
        claim: its claim.
        record: every column, read in the claim's transaction, plus ``_db_now``.
        read_at: ``time.monotonic()`` of that read.
        started: the claim is its step's start (False: prefetched, to be started).
    """

    domain: Domain
    claim: Claim
    record: dict[str, Any]
    read_at: float
    started: bool


class LaneClaims:
    """One domain's claim statements for one lane, built once: started (an idle executor's),
    prefetched (a short hold), and unstarted with the stage's lease (a caller's own claim)."""

    def __init__(self, domain: Domain, lane: str, now: ColumnElement[float]) -> None:
        self.domain = domain
        stages = domain.lane_stages(lane)
        self.started: Update = queries.claim_statement(domain, stages, now, started=True)
        self.prefetched: Update = queries.claim_statement(
            domain, stages, now, started=False, hold=PREFETCH_HOLD
        )
        self.unstarted: Update = queries.claim_statement(domain, stages, now, started=False)
        self.read: Select[Any] = queries.read_statement(domain, now)
        # PostgreSQL's: each claim with its read, one statement.
        self.started_read = queries.claim_and_read_statement(domain, self.started, now)
        self.prefetched_read = queries.claim_and_read_statement(domain, self.prefetched, now)
        self._analyzed = False
        self._stats_checked_at = -math.inf

    def needs_no_sort(self, conn: Connection) -> bool:
        """PostgreSQL: True while the table has no statistics yet (looked up at most every
        :data:`STATS_RECHECK` seconds, never again once it has them): the claim then runs
        under :data:`~conveyor.pipeline.queries.NO_SORT`, in a transaction of its own (three
        round trips more), instead of reading and sorting every open record
        (:func:`~conveyor.pipeline.queries.has_statistics`). ``conn`` must not be in a
        transaction."""
        if self._analyzed:
            return False
        checked = time.monotonic()
        if checked - self._stats_checked_at >= STATS_RECHECK:
            with autocommit(conn):  # a read: no BEGIN, no COMMIT
                self._analyzed = queries.has_statistics(conn, self.domain.table)
            self._stats_checked_at = checked
        return not self._analyzed


def claim_jobs(
    conn: Connection,
    claims: LaneClaims,
    limit: int,
    *,
    started: bool = True,
    holder: str | None = None,
) -> list[Job]:
    """Claim up to ``limit`` records in one statement and read them, in one transaction:
    on PostgreSQL the claim and its read are one statement and its own transaction (one round
    trip, ``conn`` must not be in a transaction); on SQLite two, in one.

    Returns:
        The claimed records in claim order ([] when no work, P12).
    """
    if conn.dialect.name == "postgresql":
        statement = claims.started_read if started else claims.prefetched_read
        if claims.needs_no_sort(conn):
            with conn.begin():
                conn.exec_driver_sql(queries.NO_SORT)
                rows = queries.claim_and_read(conn, statement, limit, holder)
        else:
            with autocommit(conn):
                rows = queries.claim_and_read(conn, statement, limit, holder)
        read_at = time.monotonic()
        jobs = []
        for record in records_of(rows):
            del record["_commit"]
            claim = Claim(record_id=int(record["id"]), token=str(record["claim_token"]))
            jobs.append(Job(claims.domain, claim, record, read_at, started))
        return jobs
    with conn.begin():  # SQLite's synchronous=NORMAL in WAL mode commits without a sync
        got = queries.claim_with(
            conn, claims.started if started else claims.prefetched, limit, holder
        )
        rows = queries.read_claimed(conn, claims.read, [c.record_id for c in got]) if got else []
    read_at = time.monotonic()
    tokens = {c.record_id: c for c in got}
    return [
        Job(claims.domain, tokens[r["id"]], r, read_at, started)
        for r in records_of(rows)
        if r["id"] in tokens
    ]


def records_of(rows: Sequence[Row[Any]]) -> list[dict[str, Any]]:
    """Rows as dicts; the column names are read once per result (``Row._fields`` and
    ``Row._asdict`` rebuild them for every row)."""
    if not rows:
        return []
    fields = rows[0]._fields
    return [dict(zip(fields, row, strict=True)) for row in rows]


class Producer:
    """One lane's claimer and its executor threads, in one process.

    Args:
        engine: the database.
        lane: the lane's name.
        domains: the domains with stages in the lane.
        workers: executor threads (the lane's worker count).
        prefetch: records claimed beyond idle executors (``[pipeline] prefetch``).
        poll_interval: seconds between looks for work when no wake-up comes.
        now: the statements' time (:func:`~conveyor.pipeline.queries.now_of`).
        execute: runs one job's step; returns its finished outcome, or None (nothing to save).
        complete: takes a finished outcome (the lane's completer).
        held: the pool's held claims.
        notifier: wake-ups (new work may be claimable).
        stopping: set when the pool stops.
        holder: this process's name for its claims, written to each claimed row's ``claimed_by``.
        paused: asked before each claim; True skips the lane for now (pause, drain).
    """

    def __init__(
        self,
        engine: Engine,
        lane: str,
        domains: Sequence[Domain],
        *,
        workers: int,
        prefetch: int,
        poll_interval: float,
        now: ColumnElement[float],
        execute: Callable[[Job], Finished | None],
        complete: Callable[[Finished], None],
        held: Held,
        notifier: Notifier,
        stopping: threading.Event,
        holder: str = "",
        paused: Callable[[str], bool] | None = None,
    ) -> None:
        self.engine = engine
        self.lane = lane
        self.workers = workers
        self.prefetch = prefetch
        self.poll_interval = poll_interval
        self.now = now
        self.execute = execute
        self.complete = complete
        self.held = held
        self.notifier = notifier
        self.stopping = stopping
        self.holder = holder
        self.paused = paused
        self._claims = [LaneClaims(d, lane, now) for d in domains if d.lane_stages(lane)]
        self._next = 0  # the domain claimed from first, in turn, so none starves
        self._queue: deque[Job] = deque()
        self._running = 0
        self._closed = False
        # One lock, two conditions: executors wait for work, the producer for an idle
        # executor; each wake-up goes only to a thread that has something to do (a wake-up
        # across threads costs a context switch, which on a busy machine dwarfs a no-op step).
        lock = threading.Lock()
        self._cond = threading.Condition(lock)
        self._freed = threading.Condition(lock)
        self._threads: list[threading.Thread] = []

    def start(self) -> None:
        """Start the producer thread and the executor threads."""
        for index in range(self.workers):
            thread = threading.Thread(
                target=self._execute, name=f"conveyor-{self.lane}-{index}", daemon=True
            )
            thread.start()
            self._threads.append(thread)
        producer = threading.Thread(
            target=self._produce, name=f"conveyor-producer-{self.lane}", daemon=True
        )
        producer.start()
        self._producer = producer

    def busy(self) -> int:
        """Executors running a step, plus records claimed and waiting for one."""
        with self._cond:
            return self._running + len(self._queue)

    def alive(self) -> bool:
        """True while the producer thread and every executor thread run."""
        return self._producer.is_alive() and all(t.is_alive() for t in self._threads)

    def wake(self) -> None:
        """Make the producer look again now (an executor became free, or the pool stops)."""
        with self._cond:
            self._freed.notify_all()

    def join(self, deadline: float | None = None) -> None:
        """Wait until ``time.monotonic()`` reaches ``deadline`` (None: for ever) for the
        threads to end."""
        for thread in [self._producer, *self._threads]:
            thread.join(None if deadline is None else max(0.0, deadline - time.monotonic()))

    def join_producer(self, deadline: float) -> None:
        """Wait for the producer thread (it ends soon after the stop, releasing its queue)."""
        self._producer.join(max(0.0, deadline - time.monotonic()))

    # -- the producer ---------------------------------------------------------------------

    def _produce(self) -> None:
        try:
            while not self.stopping.is_set():
                try:
                    self._loop()
                except Exception as exc:
                    # An outage is told once per process (and its end once), not per thread.
                    if not outage.DATABASE.failed(exc, f"{self.lane} producer"):
                        log.exception("producer of lane %s: unexpected error", self.lane)
                    self.stopping.wait(_ERROR_BACKOFF)
        finally:
            self._close()

    def _room(self) -> tuple[int, int]:
        """(records to claim started, for idle executors; records to prefetch)."""
        with self._cond:
            idle = self.workers - self._running
            waiting = len(self._queue)
            return max(0, idle - waiting), max(0, self.prefetch - max(0, waiting - idle))

    def _loop(self) -> None:
        while not self.stopping.is_set():
            since = self.notifier.generation
            idle, spare = self._room()
            if idle == 0 and spare == 0:
                self._wait_for_executor()
                continue
            if self.paused is not None and self.paused(self.lane):
                self.notifier.wait(since, self.poll_interval)
                continue
            pause: float | None = None
            prefetched = 0
            # A connection per look, none held while waiting (the completer's rule too): one
            # that sat idle through a database restart would fail the first claim after the
            # outage had ended, and be reported as a second outage. The pool drops connections
            # older than a disconnect that another thread met.
            with self.engine.connect() as conn:
                found = self._claim(conn, idle, started=True) if idle else 0
                if idle and found < idle:
                    # The lane has no more work now: nothing to prefetch either. Look again at
                    # the next wake-up, the next poll, or when another worker's prefetched
                    # claim lapses (its process may be dead: that record is free then, D18).
                    pause = min(self.poll_interval, self._next_hold_end(conn))
                elif spare:
                    prefetched = self._claim(conn, spare, started=False)
            outage.DATABASE.succeeded()
            if pause is not None:
                self.notifier.wait(since, pause)
            elif spare and prefetched == 0 and not idle:
                self._wait_for_executor()

    def _claim(self, conn: Connection, count: int, *, started: bool) -> int:
        """Claim up to ``count`` records, domain by domain in turn; queue them."""
        found = 0
        order = self._claims[self._next :] + self._claims[: self._next]
        self._next = (self._next + 1) % max(1, len(self._claims))
        for claims in order:
            if found >= count or self.stopping.is_set():
                break
            jobs = claim_jobs(conn, claims, count - found, started=started, holder=self.holder)
            if not jobs:
                continue
            self.held.add(claims.domain, [j.claim for j in jobs])
            with self._cond:
                self._queue.extend(jobs)
                self._cond.notify(len(jobs))
            found += len(jobs)
        return found

    def _next_hold_end(self, conn: Connection) -> float:
        """Seconds until the first prefetched claim of the lane lapses (inf: none)."""
        ends = []
        with autocommit(conn):  # a read: no BEGIN, no COMMIT
            for claims in self._claims:
                stages = [s.name for s in claims.domain.lane_stages(self.lane)]
                end = queries.next_hold_end(conn, claims.domain, stages, self.now)
                if end is not None:
                    ends.append(end + _HOLD_MARGIN)
        return min(ends, default=math.inf)

    def _wait_for_executor(self) -> None:
        with self._cond:
            idle = self.workers - self._running - len(self._queue)
            if idle <= 0 and not self.stopping.is_set():
                self._freed.wait(self.poll_interval)

    def _close(self) -> None:
        """No more claims: release at once every record no executor has started."""
        with self._cond:
            unstarted = list(self._queue)
            self._queue.clear()
            self._closed = True
            self._cond.notify_all()
            self._freed.notify_all()
        if unstarted:
            release_jobs(self.engine, self.now, self.held, unstarted)

    # -- the executors --------------------------------------------------------------------

    def _execute(self) -> None:
        while True:
            with self._cond:
                while not self._queue and not self._closed:
                    self._cond.wait()
                if not self._queue:
                    return
                job = self._queue.popleft()
                self._running += 1
            try:
                finished = self.execute(job)
                if finished is not None:
                    self.complete(finished)
            except Exception:
                log.exception("executor of lane %s: unexpected error", self.lane)
            finally:
                with self._cond:
                    self._running -= 1
                    self._freed.notify()


def release_jobs(
    engine: Engine, now: ColumnElement[float], held: Held, jobs: Sequence[Job]
) -> None:
    """Give back the claims of ``jobs`` (one statement per domain), so others take them now:
    the release wakes every worker (:func:`~conveyor.db.notify.announce_work`), which would
    otherwise find these records at its next poll."""
    by_domain: dict[str, list[Job]] = {}
    for job in jobs:
        by_domain.setdefault(job.domain.name, []).append(job)
    try:
        with engine.begin() as conn:
            released = sum(
                queries.release_claims(conn, group[0].domain, [j.claim for j in group], now)
                for group in by_domain.values()
            )
            if released:
                announce_work(conn)
    except Exception as exc:  # their short holds lapse on their own
        if not outage.DATABASE.failed(exc, "release on stop"):
            log.warning("could not release unstarted claims", exc_info=True)
        return
    for group in by_domain.values():
        held.drop(group[0].domain, [j.claim for j in group])
        log.info("%d unstarted %ss released on stop", len(group), group[0].domain.noun)
