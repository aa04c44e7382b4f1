"""What a step receives while it runs: its record, its claim, and the ways to keep or check it.

:class:`StepContext` is handed to every step; :class:`Heartbeat` extends a long step's lease
while it runs (M8); a step sees the pool stopping (:class:`StopRequested`) or its claim lost
(:class:`~conveyor.errors.ClaimLost`) through :meth:`StepContext.check`.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

from sqlalchemy import Connection, Engine
from sqlalchemy.sql import ColumnElement

from conveyor.clock import Clock
from conveyor.errors import ClaimLost
from conveyor.pipeline import queries
from conveyor.pipeline.claims import Claim
from conveyor.pipeline.stages import Domain, Stage

__all__ = ["Flag", "Heartbeat", "StepContext", "StopRequested"]

log = logging.getLogger("conveyor.pipeline")
T = TypeVar("T")


class Flag:
    """A flag one thread sets and others read (``set``, ``is_set``): what a step's context
    needs of a :class:`threading.Event`, without its lock and condition per record."""

    __slots__ = ("_set",)

    def __init__(self) -> None:
        self._set = False

    def set(self) -> None:
        """Raise the flag (it stays raised)."""
        self._set = True

    def is_set(self) -> bool:
        """True once :meth:`set` was called."""
        return self._set


class StopRequested(Exception):
    """Raised by :meth:`StepContext.check` when the pool is stopping; the claim is released."""


@dataclass
class StepContext:
    """What a step receives.

    Attributes:
        domain: the record's domain.
        stage: the stage the record is in.
        record: every column of the record, read after the claim (D7).
        claim: this step's claim (id, token).
        engine: the database, for the step's own reads.
        clock: the worker's own clock; steps date their rows with :meth:`now` instead (D17).
        db_time: the database's time when the record was read, epoch seconds.
        read_at: ``time.monotonic()`` when the record was read (with ``db_time``, gives
            :meth:`now` without a round trip).
    """

    domain: Domain
    stage: Stage
    record: Mapping[str, Any]
    claim: Claim
    engine: Engine
    clock: Clock
    db_time: float = 0.0
    read_at: float = field(default_factory=time.monotonic)
    lost: Flag = field(default_factory=Flag)
    stopping: threading.Event | Flag = field(default_factory=Flag)
    produced: list[str] = field(default_factory=list)
    now_sql: ColumnElement[float] | None = None

    def produced_object(self, key: str) -> str:
        """Note that this step is about to write the stored object ``key`` (returns ``key``).

        Should the record halt or be deleted before the object gets its journal row, the
        engine removes it (:attr:`Domain.discard`).
        """
        self.produced.append(key)
        return key

    def now(self) -> float:
        """The database's time now, epoch seconds: what a step dates every row it writes with
        (attempts, texts, journal rows, album events), so that no worker's clock enters the
        database (D17).

        The database's time at the read plus the monotonic time since, so no round trip; a test
        clock that drives the database's time (``FakeClock``) is read directly.
        """
        if self.clock.drives_database_time:
            return self.clock.now()
        return self.db_time + (time.monotonic() - self.read_at)

    def _now(self) -> ColumnElement[float]:
        if self.now_sql is None:
            self.now_sql = queries.now_of(self.clock)
        return self.now_sql

    def check(self) -> None:
        """Raise if the step should stop now.

        Raises:
            ClaimLost: the heartbeat found the claim gone (another holder, or a human resume).
            StopRequested: the pool is stopping; the claim will be released.
        """
        if self.lost.is_set():
            raise ClaimLost(f"{self.domain.noun} {self.claim.record_id}: claim lost")
        if self.stopping.is_set():
            raise StopRequested()

    def heartbeat(self) -> None:
        """Extend the lease to the stage's lease from the database's now, if the claim holds.

        Raises:
            ClaimLost: the claim is gone; the step must stop without writing.
        """
        with self.engine.begin() as conn:
            held = queries.extend_claim(
                conn, self.domain, self.claim, self._now(), self.stage.lease
            )
        if not held:
            self.lost.set()
        self.check()

    def guarded(self, writes: Callable[[Connection], T]) -> T:
        """Run ``writes`` in a transaction that commits only while the claim holds.

        Used for writes that must land before an outside call, e.g. the attempt row (D12).

        Raises:
            ClaimLost: the claim is gone; nothing was written.
        """
        with self.engine.connect() as conn, conn.begin() as tx:
            if not queries.touch_if_held(conn, self.domain, self.claim, self._now()):
                tx.rollback()
                self.lost.set()
                raise ClaimLost(f"{self.domain.noun} {self.claim.record_id}: claim lost")
            return writes(conn)


class Heartbeat:
    """Extends a long step's lease every ``lease / 3`` seconds until stopped or lost (M8).

    It runs until the claim is given back (the outcome saved, or the claim released), so the
    lease never lapses between the step's end and its save.
    """

    def __init__(self, ctx: StepContext) -> None:
        self._ctx = ctx
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._run, name="conveyor-heartbeat", daemon=True)

    def start(self) -> None:
        """Begin beating (a daemon thread)."""
        self._thread.start()

    def stop(self) -> None:
        """Stop beating and wait for the thread (idempotent)."""
        self._done.set()
        if self._thread.is_alive():
            self._thread.join()

    def _run(self) -> None:
        interval = max(0.05, self._ctx.stage.lease / 3)
        while not self._done.wait(interval):
            try:
                self._ctx.heartbeat()
            except (ClaimLost, StopRequested):
                if self._ctx.lost.is_set():
                    return
            except Exception:  # a transient database error: the next beat tries again
                log.warning("heartbeat failed", exc_info=True)
