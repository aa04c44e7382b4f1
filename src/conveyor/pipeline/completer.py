"""Save finished steps' outcomes: in batches, each write guarded by its own token (P6).

A :class:`Completer` runs one thread per lane and process. Executors hand it each outcome the
moment its step returns; it saves whatever has gathered in one transaction, at once: the first
outcome waits only for the save before it, never for another record's step. A save that raises
is retried one outcome at a time, and an outcome whose own save raises is a failed attempt
with its error (then ``attempts_exhausted``).

:class:`Saver` is the saving itself, shared by the completer thread and by the synchronous
:meth:`~conveyor.pipeline.Executor.run_once`.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from sqlalchemy import Connection, Engine
from sqlalchemy.exc import DBAPIError
from sqlalchemy.sql import ColumnElement

from conveyor.config import PipelineSettings
from conveyor.db import outage
from conveyor.errors import DeclarationError
from conveyor.pipeline import queries
from conveyor.pipeline.claims import Claim, Held
from conveyor.pipeline.context import Heartbeat
from conveyor.pipeline.halts import EngineHalt
from conveyor.pipeline.lifecycle import Applied, Planned, plan_outcome, report, save_planned
from conveyor.pipeline.metrics import CLAIMS_LOST, STEP_OUTCOMES
from conveyor.pipeline.outcomes import Fail, Halt, Outcome
from conveyor.pipeline.redact import redact
from conveyor.pipeline.stages import Domain, Stage

__all__ = ["Completer", "Finished", "Saver", "log_lost", "plan"]

log = logging.getLogger("conveyor.pipeline")

# Seconds the completer waits before trying again after its database failed.
_ERROR_BACKOFF = 1.0


@dataclass(slots=True)
class Finished:
    """A step's outcome, planned and waiting to be saved.

    Attributes:
        domain: the record's domain.
        plan: the planned writes.
        stage: the stage the step ran in.
        attempts: the record's failure count when the step started.
        produced: stored objects the step wrote (removed if the record halted or is gone).
        beat: the step's heartbeat, running until the outcome is saved.
    """

    domain: Domain
    plan: Planned
    stage: Stage
    attempts: int
    produced: list[str] = field(default_factory=list)
    beat: Heartbeat | None = None

    def let_go(self) -> None:
        """Stop the heartbeat: the claim is given back (or gone), its lease may lapse."""
        if self.beat is not None:
            self.beat.stop()


def plan(
    settings: PipelineSettings,
    now: ColumnElement[float],
    domain: Domain,
    stage: Stage,
    claim: Claim,
    outcome: Outcome,
    attempts: int,
) -> Planned:
    """Plan ``outcome`` under ``settings`` (retry pause, attempts limit); an outcome the stage
    does not allow halts ``step_error`` instead."""
    try:
        return _plan(settings, now, domain, stage, claim, outcome, attempts)
    except DeclarationError as exc:
        log.error("%s: %s", domain.name, exc)
        return _plan(
            settings, now, domain, stage, claim, Halt(EngineHalt.STEP_ERROR, str(exc)), attempts
        )


def _plan(
    settings: PipelineSettings,
    now: ColumnElement[float],
    domain: Domain,
    stage: Stage,
    claim: Claim,
    outcome: Outcome,
    attempts: int,
) -> Planned:
    return plan_outcome(
        domain,
        claim,
        stage.name,
        outcome,
        now=now,
        max_attempts=settings.max_attempts,
        retry_base=settings.retry_base,
        retry_max=settings.retry_max,
        attempts=attempts,
    )


def log_lost(domain: Domain, stage: str, claim: Claim) -> None:
    """P6: a claim lost while its step ran is logged once, counted, and writes nothing."""
    CLAIMS_LOST.labels(domain.name, stage).inc()
    log.warning(
        "%s %s: claim lost during %s; result discarded", domain.noun, claim.record_id, stage
    )


class Saver:
    """Saves finished outcomes, each guarded by its own token.

    Args:
        engine: the database (for removing a halted step's leftovers).
        settings: ``[pipeline]`` settings, for re-planning an outcome whose save raised.
        now: the statements' time (:func:`~conveyor.pipeline.queries.now_of`).
        held: the pool's held claims; a saved one is forgotten.
        on_advance: called after a batch advanced a record (wakes other workers).
        on_pause: called with the shortest retry pause a batch wrote.
    """

    def __init__(
        self,
        engine: Engine,
        settings: PipelineSettings,
        now: ColumnElement[float],
        *,
        held: Held | None = None,
        on_advance: Callable[[], None] | None = None,
        on_pause: Callable[[float], None] | None = None,
    ) -> None:
        self.engine = engine
        self.settings = settings
        self.now = now
        self.held = held
        self.on_advance = on_advance
        self.on_pause = on_pause
        self._counters: dict[tuple[str, str, str], Any] = {}

    def save(
        self,
        conn: Connection,
        items: Sequence[Finished],
        *,
        later: Callable[[Callable[[], None]], None] | None = None,
    ) -> list[Applied | None]:
        """Save ``items`` (any domains) in one transaction per domain; on an error, one at a time.

        Args:
            conn: the connection to save on.
            items: the finished outcomes.
            later: takes the removal of a halted or lost step's stored leftovers (object store
                requests) to run elsewhere; None runs it here, after the save.

        Returns:
            For each item, what was written, or None when its claim was gone (P6).

        Raises:
            Exception: the connection broke; nothing of the failed transaction was saved and
                every item is still held (the caller tries again).
        """
        results: list[Applied | None] = [None] * len(items)
        by_domain: dict[str, list[int]] = {}
        for index, item in enumerate(items):
            by_domain.setdefault(item.domain.name, []).append(index)
        for indexes in by_domain.values():
            group = [items[i] for i in indexes]
            for i, applied in zip(indexes, self._save_domain(conn, group, later), strict=True):
                results[i] = applied
        return results

    def _save_domain(
        self,
        conn: Connection,
        items: Sequence[Finished],
        later: Callable[[Callable[[], None]], None] | None,
    ) -> list[Applied | None]:
        domain = items[0].domain
        try:
            with conn.begin():
                held = save_planned(conn, domain, [i.plan for i in items], self.now)
        except Exception:
            if conn.invalidated:
                raise
            held = [self._save_alone(conn, item) for item in items]
        results: list[Applied | None] = []
        # Counted and told once per batch: a counter or a wake-up per record is measurable.
        counts: dict[tuple[str, str], int] = {}
        pause: float | None = None
        for item, ok in zip(items, held, strict=True):
            # Only now that the outcome is saved (the claim given back) may the lease lapse.
            item.let_go()
            if self.held is not None:
                self.held.drop(domain, [item.plan.claim])
            applied = self._report(item, ok, later)
            results.append(applied)
            if applied is None:
                continue
            key = (item.stage.name, applied.outcome)
            counts[key] = counts.get(key, 0) + 1
            if applied.retry_in is not None:
                pause = applied.retry_in if pause is None else min(pause, applied.retry_in)
        for (stage, outcome), count in counts.items():
            self._counter(domain.name, stage, outcome).inc(count)
        if self.on_advance is not None and any(o == "advanced" for _, o in counts):
            self.on_advance()
        if pause is not None and self.on_pause is not None:
            self.on_pause(pause)
        return results

    def _save_alone(self, conn: Connection, item: Finished) -> bool:
        """Save one outcome; a save that raises is a failed attempt with its error (retried,
        then halted ``attempts_exhausted`` with that error)."""
        domain = item.domain
        try:
            with conn.begin():
                return save_planned(conn, domain, [item.plan], self.now)[0]
        except DeclarationError as exc:
            log.error("%s: %s", domain.name, exc)
            outcome: Fail | Halt = Halt(EngineHalt.STEP_ERROR, str(exc))
        except DBAPIError as exc:
            if exc.connection_invalidated:
                raise
            outcome = Fail(f"saving the outcome failed: {_describe(exc)}")
        except Exception as exc:
            outcome = Fail(f"saving the outcome failed: {_describe(exc)}")
        log.error("%s %s: %s", domain.noun, item.plan.claim.record_id, redact(outcome.error))
        item.plan = _plan(
            self.settings, self.now, domain, item.stage, item.plan.claim, outcome, item.attempts
        )
        with conn.begin():
            return save_planned(conn, domain, [item.plan], self.now)[0]

    def _report(
        self, item: Finished, held: bool, later: Callable[[Callable[[], None]], None] | None
    ) -> Applied | None:
        applied = report(item.domain, item.plan, held)
        if item.produced and (not applied.held or applied.outcome == "halted"):
            discard = partial(
                discard_leftovers, self.engine, item.domain, item.plan.claim, item.produced
            )
            if later is None:
                discard()
            else:
                later(discard)
        if not applied.held:
            log_lost(item.domain, item.stage.name, item.plan.claim)
            return None
        return applied

    def _counter(self, domain: str, stage: str, outcome: str) -> Any:
        # Labelled children looked up once: a label lookup per record is measurable.
        key = (domain, stage, outcome)
        if key not in self._counters:
            self._counters[key] = STEP_OUTCOMES.labels(domain, stage, outcome)
        return self._counters[key]


def discard_leftovers(
    engine: Engine, domain: Domain, claim: Claim, produced: Sequence[str]
) -> None:
    """Remove what a step stored without a journal row, if its record halted or is gone.

    A record that merely lost its claim to another holder is left alone: that holder may be
    writing the same keys right now (the periodic sweep takes true leftovers).
    """
    if domain.discard is None or not produced:
        return
    try:
        with engine.connect() as conn:
            record = queries.read_record(conn, domain, claim.record_id)
        if record is not None and record["halted_at"] is None:
            return
        domain.discard(engine, produced)
    except Exception:  # the sweep removes them later
        log.warning("could not remove the leftovers of a step", exc_info=True)


def _describe(exc: BaseException) -> str:
    """The error's kind and the first line of its message (a driver's message is multi-line)."""
    cause = exc.orig if isinstance(exc, DBAPIError) and exc.orig is not None else exc
    lines = str(cause).strip().splitlines()
    return f"{type(exc).__name__}: {lines[0] if lines else ''}".rstrip(": ")


class Completer:
    """One lane's saving thread: outcomes are saved as they arrive, in batches.

    The stored leftovers of a halted or lost step are removed by a second thread of its own:
    those are object store requests, and a store that is slow or away (each request retried,
    with timeouts of seconds) must not hold up the lane's saves, whose records would wait
    unsaved, and those without a heartbeat lose their leases and run again.

    Args:
        engine: the database (a connection from its pool per batch, none while idle).
        saver: what saves.
        name: the thread's name.
    """

    def __init__(self, engine: Engine, saver: Saver, *, name: str = "conveyor-completer") -> None:
        self.engine = engine
        self.saver = saver
        self._items: deque[Finished] = deque()
        self._cond = threading.Condition()
        self._closed = False
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._leftovers: queue.SimpleQueue[Callable[[], None] | None] = queue.SimpleQueue()
        self._remover = threading.Thread(target=self._remove, name=f"{name}-leftovers", daemon=True)

    def start(self) -> None:
        """Start the saving thread and the thread that removes leftovers."""
        self._thread.start()
        self._remover.start()

    def put(self, item: Finished) -> None:
        """Hand over a finished outcome; it is saved within milliseconds (after close: dropped,
        its claim left to the pool's release)."""
        with self._cond:
            if not self._closed:
                self._items.append(item)
                self._cond.notify()
                return
        item.let_go()

    def close(self, timeout: float | None = None) -> None:
        """Save every outcome handed over so far, then end the thread. Leftovers not yet
        removed within ``timeout`` are left to the periodic sweep."""
        with self._cond:
            self._closed = True
            self._cond.notify()
        deadline = None if timeout is None else time.monotonic() + timeout
        self._thread.join(timeout)
        if self._remover.is_alive():
            self._leftovers.put(None)
            self._remover.join(None if deadline is None else max(0.0, deadline - time.monotonic()))

    def _remove(self) -> None:
        while (removal := self._leftovers.get()) is not None:
            try:
                removal()
            except Exception:  # the periodic sweep removes them later
                log.warning("could not remove the leftovers of a step", exc_info=True)

    def _take(self) -> list[Finished] | None:
        with self._cond:
            while not self._items and not self._closed:
                self._cond.wait()
            if not self._items:
                return None
            batch = list(self._items)
            self._items.clear()
            return batch

    def _run(self) -> None:
        batch: list[Finished] | None = None
        while True:
            if batch is None:
                batch = self._take()
                if batch is None:
                    return
            try:
                # A connection per batch, not one held while idle: a connection that sat idle
                # through a database restart would fail the first save after the outage had
                # ended and be logged as a second outage. The pool drops connections older
                # than a disconnect that another thread met.
                with self.engine.connect() as conn:
                    self.saver.save(conn, batch, later=self._leftovers.put)
                batch = None
                outage.DATABASE.succeeded()
            except Exception as exc:
                # The batch is kept (its heartbeats keep its leases) and saved once the
                # database answers again; its claims, if they lapse meanwhile, fence it out.
                if not outage.DATABASE.failed(exc, "completer"):
                    log.exception("completer: unexpected error")
                with self._cond:
                    if self._closed:
                        # A stopping pool does not wait on a database that is away: the
                        # claims lapse (or the pool releases them).
                        for item in [*(batch or []), *self._items]:
                            item.let_go()
                        return
                    self._cond.wait(_ERROR_BACKOFF)
