"""Run steps for claims: claim a batch, read it, watchdog, call, save if held (P1-P12, D3).

A worker calls :meth:`Executor.run_batch` in a loop on the one connection it holds. Every path
ends in exactly one of: no work (0, no noise, P12), a conditional save, a release (stop, or a
buffered claim whose lease would run low before its turn), or a lost claim that writes nothing
and is logged once and counted (P6).

Round trips per batch of K records: one claim transaction (the claim statement, then one read
of all K records), the steps, and one save transaction holding every outcome, each write still
guarded by its own token. Long steps (heartbeat stages) and slow lanes run with K = 1.
"""

from __future__ import annotations

import logging
import threading
import time
import traceback
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from sqlalchemy import Connection, Engine, Row, Select, Update
from sqlalchemy.exc import DBAPIError
from sqlalchemy.sql import ColumnElement

from conveyor.clock import Clock
from conveyor.config import PipelineSettings
from conveyor.db.engine import asynchronous_commit
from conveyor.errors import ClaimLost, DeclarationError, Unprocessable
from conveyor.pipeline import queries
from conveyor.pipeline.claims import Claim
from conveyor.pipeline.halts import EngineHalt
from conveyor.pipeline.lifecycle import Applied, Planned, plan_outcome, report, save_planned
from conveyor.pipeline.metrics import CLAIMS_LOST, STEP_OUTCOMES, STEP_SECONDS
from conveyor.pipeline.outcomes import Fail, Halt, Outcome
from conveyor.pipeline.redact import redact
from conveyor.pipeline.stages import Domain, Stage

__all__ = ["Executor", "Flag", "StepContext", "StopRequested"]

log = logging.getLogger("conveyor.pipeline")
T = TypeVar("T")

# Seconds of step work one claimed batch should hold at most: the batch size follows the
# lane's measured step time, so fast lanes claim many records per statement and slow ones one.
_BATCH_SECONDS = 0.05
# Weight of the newest step time in the lane's moving average.
_EMA_WEIGHT = 0.2


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


@dataclass
class _Lane:
    """A lane's statements, built once, and its measured step time."""

    stages: list[Stage]
    claim: Update
    read: Select[Any]
    heartbeat: bool
    step_seconds: float | None = None


@dataclass(slots=True)
class _Pending:
    plan: Planned
    stage: Stage
    attempts: int
    produced: list[str] = field(default_factory=list)
    beat: _Heartbeat | None = None
    """The step's heartbeat, still running until the outcome is saved."""


class Executor:
    """Claims and runs steps of one lane.

    Args:
        engine: the database.
        clock: time source: the database's clock for decisions unless it is a test clock that
            drives the database's time (D17).
        settings: ``[pipeline]`` settings (limits, attempts, back-off, ``claim_batch``).
        stopping: set when the pool stops; long steps see it through :meth:`StepContext.check`.
        on_advance: called after a record advanced (to wake workers of other lanes).
        on_pause: called with the pause in seconds after a postpone or a retryable failure,
            so idle workers wake when it ends rather than at the next poll.
    """

    def __init__(
        self,
        engine: Engine,
        clock: Clock,
        settings: PipelineSettings,
        *,
        stopping: threading.Event | None = None,
        on_advance: Callable[[], None] | None = None,
        on_pause: Callable[[float], None] | None = None,
    ) -> None:
        self.engine = engine
        self.clock = clock
        self.settings = settings
        self.stopping = stopping or threading.Event()
        self.on_advance = on_advance
        self.on_pause = on_pause
        self.now = queries.now_of(clock)
        self._lanes: dict[tuple[str, str], _Lane | None] = {}
        self._reads: dict[str, Select[Any]] = {}
        self._timers: dict[tuple[str, str], Any] = {}
        self._counters: dict[tuple[str, str, str], Any] = {}
        self._held: dict[tuple[str, int, str], tuple[Domain, Claim]] = {}
        self._held_lock = threading.Lock()

    # -- claims ---------------------------------------------------------------------------

    def _read(self, domain: Domain) -> Select[Any]:
        if domain.name not in self._reads:
            self._reads[domain.name] = queries.read_statement(domain, self.now)
        return self._reads[domain.name]

    def _lane(self, domain: Domain, lane: str) -> _Lane | None:
        key = (domain.name, lane)
        if key not in self._lanes:
            stages = domain.lane_stages(lane)
            self._lanes[key] = (
                _Lane(
                    stages,
                    queries.claim_statement(domain, stages, self.now),
                    self._read(domain),
                    any(s.heartbeat for s in stages),
                )
                if stages
                else None
            )
        return self._lanes[key]

    def batch_size(self, domain: Domain, lane: str) -> int:
        """How many records the next claim of ``lane`` takes: bounded by ``claim_batch`` and by
        the lane's step time, so no lease runs low while a claim waits in the batch."""
        state = self._lane(domain, lane)
        if state is None or state.step_seconds is None:
            return 1
        fits = int(_BATCH_SECONDS / max(state.step_seconds, 1e-6))
        return max(1, min(self.settings.claim_batch, fits))

    def claim(self, domain: Domain, lane: str) -> Claim | None:
        """Claim the next record of ``domain`` in ``lane``; None when there is no work (P12)."""
        state = self._lane(domain, lane)
        if state is None:
            return None
        with self.engine.connect() as conn, conn.begin():
            asynchronous_commit(conn)
            claims = queries.claim_with(conn, state.claim, 1)
        return claims[0] if claims else None

    def held_claims(self) -> list[tuple[Domain, Claim]]:
        """Claims this executor holds right now (for a pool that stops)."""
        with self._held_lock:
            return list(self._held.values())

    def _hold(self, domain: Domain, claims: Sequence[Claim]) -> None:
        with self._held_lock:
            for c in claims:
                self._held[(domain.name, c.record_id, c.token)] = (domain, c)

    def _drop(self, domain: Domain, claims: Sequence[Claim]) -> None:
        with self._held_lock:
            for c in claims:
                self._held.pop((domain.name, c.record_id, c.token), None)

    # -- running --------------------------------------------------------------------------

    def run_once(self, domain: Domain, lane: str) -> bool:
        """Claim one record of ``domain`` in ``lane`` and run its step.

        Returns:
            False when there was no work now (P12), True when a record was handled.
        """
        with self.engine.connect() as conn:
            return self.run_batch(conn, domain, lane, limit=1) > 0

    def run_batch(
        self, conn: Connection, domain: Domain, lane: str, *, limit: int | None = None
    ) -> int:
        """Claim up to ``limit`` records of ``domain`` in ``lane`` in one statement, run them.

        Args:
            conn: the worker's connection, outside any transaction.
            limit: records to claim; :meth:`batch_size` when None.

        Returns:
            How many records were claimed (0: no work now, P12).
        """
        state = self._lane(domain, lane)
        if state is None:
            return 0
        count = limit if limit is not None else self.batch_size(domain, lane)
        with conn.begin():
            asynchronous_commit(conn)
            claims = queries.claim_with(conn, state.claim, count)
            rows = queries.read_claimed(conn, state.read, [c.record_id for c in claims])
        if not claims:
            return 0
        self._hold(domain, claims)
        try:
            tokens = {c.record_id: c for c in claims}
            records = _records(rows)
            pairs = [(tokens[r["id"]], r) for r in records if r["id"] in tokens]
            self._run_rows(conn, domain, state, pairs)
        finally:
            self._drop(domain, claims)
        return len(claims)

    def run_claimed(self, domain: Domain, claim: Claim) -> Applied | None:
        """Run the step for an existing claim and write its outcome if the claim holds.

        Returns:
            What was written, or None when the claim was released (stop) or vanished.
        """
        with self.engine.connect() as conn:
            with conn.begin():
                rows = queries.read_claimed(conn, self._read(domain), [claim.record_id])
            if not rows:
                self._lost(domain, "?", claim)
                return None
            (record,) = _records(rows)
            state = self._lane(domain, domain.stage(record["stage"]).lane)
            assert state is not None
            return self._run_rows(conn, domain, state, [(claim, record)])[0]

    def stuck_limit(self, stage: Stage) -> float:
        """The time-in-stage limit of ``stage``: own or foreign work (D3)."""
        if stage.work == "foreign":
            return self.settings.foreign_work_limit
        return self.settings.own_work_limit

    def _run_rows(
        self,
        conn: Connection,
        domain: Domain,
        state: _Lane,
        pairs: Sequence[tuple[Claim, dict[str, Any]]],
    ) -> list[Applied | None]:
        results: list[Applied | None] = [None] * len(pairs)
        pending: list[tuple[int, _Pending]] = []
        claimed = time.monotonic()
        for index, (claim, record) in enumerate(pairs):
            stage = domain.stage(record["stage"])
            if self.stopping.is_set() or (
                index > 0 and time.monotonic() - claimed > stage.lease / 2
            ):
                # Bounded prefetch: give back what waited too long rather than let it expire.
                rest = [c for c, _ in pairs[index:]]
                self._flush(conn, domain, pending, results)
                pending = []
                with conn.begin():
                    queries.release_claims(conn, domain, rest, self.now)
                break
            item = self._prepare(conn, domain, state, claim, record, claimed)
            if item is not None:
                pending.append((index, item))
            if stage.heartbeat:
                self._flush(conn, domain, pending, results)
                pending = []
        self._flush(conn, domain, pending, results)
        return results

    def _prepare(
        self,
        conn: Connection,
        domain: Domain,
        state: _Lane,
        claim: Claim,
        record: dict[str, Any],
        read_at: float,
    ) -> _Pending | None:
        """Watchdog and step for one claimed record; the outcome planned, not yet saved.

        ``record`` is the row read after the claim, ``read_at`` the ``time.monotonic()`` of
        that read (with its ``_db_now``).
        """
        db_time = float(record.pop("_db_now"))
        if record["claim_token"] != claim.token:
            self._lost(domain, str(record["stage"]), claim)
            return None
        stage = domain.stage(record["stage"])
        attempts = int(record["attempts"])
        started_at = record["work_started_at"]
        in_stage = 0.0 if started_at is None else db_time - float(started_at)
        limit = self.stuck_limit(stage)
        if in_stage > limit:
            # D3, P10: the claimer halts a record whose work overstayed its stage.
            outcome: Outcome = Halt(
                EngineHalt.STUCK,
                f"in stage {stage.name} for {in_stage:.0f} s since its first claim, over the "
                f"{stage.work} work limit of {limit:.0f} s",
            )
            return self._plan(domain, stage, claim, outcome, attempts)
        assert stage.step is not None  # the claim selects only non-terminal stages
        ctx = StepContext(
            domain=domain,
            stage=stage,
            record=record,
            claim=claim,
            engine=self.engine,
            clock=self.clock,
            db_time=db_time,
            read_at=read_at,
            stopping=self.stopping,
            now_sql=self.now,
        )
        beat = _Heartbeat(ctx) if stage.heartbeat else None
        # The heartbeat runs until the claim is given back: by the release on stop here, or by
        # the outcome's save (:meth:`_flush`), so the lease never lapses between the step's end
        # and its save, and a beat racing the release finds the claim gone (a loss it reports)
        # instead of extending a claim nobody will save.
        handed_on = False
        started = time.monotonic()
        try:
            if beat:
                beat.start()
            outcome = stage.step(ctx)
            handed_on = True
        except ClaimLost:
            self._lost(domain, stage.name, claim)
            self._discard_leftovers(domain, claim, ctx.produced)
            return None
        except StopRequested:
            with conn.begin():
                queries.release_claim(conn, domain, claim, self.now)
            log.info("%s %s released on stop", domain.noun, claim.record_id)
            return None
        except Unprocessable as exc:
            outcome = Halt(exc.reason, exc.message)
            handed_on = True
        except Exception as exc:
            # D16: the message may quote credentials, so it is logged only redacted.
            log.error(
                "%s %s: step %s failed: %s",
                domain.noun,
                claim.record_id,
                stage.name,
                redact(f"{type(exc).__name__}: {exc}"),
            )
            if log.isEnabledFor(logging.DEBUG):
                log.debug("%s", redact("".join(traceback.format_exception(exc))))
            outcome = Fail(f"{type(exc).__name__}: {exc}")
            handed_on = True
        finally:
            if beat and not handed_on:
                beat.stop()
            elapsed = time.monotonic() - started
            self._timer(domain.name, stage.name).observe(elapsed)
            state.step_seconds = (
                elapsed
                if state.step_seconds is None
                else state.step_seconds + _EMA_WEIGHT * (elapsed - state.step_seconds)
            )
        if ctx.lost.is_set():
            if beat:
                beat.stop()
            self._lost(domain, stage.name, claim)
            self._discard_leftovers(domain, claim, ctx.produced)
            return None
        try:
            pending = self._plan(domain, stage, claim, outcome, attempts)
        except BaseException:
            if beat:
                beat.stop()
            raise
        pending.produced = ctx.produced
        pending.beat = beat
        return pending

    def _plan(
        self, domain: Domain, stage: Stage, claim: Claim, outcome: Outcome, attempts: int
    ) -> _Pending:
        try:
            plan = self._plan_one(domain, stage, claim, outcome, attempts)
        except DeclarationError as exc:
            log.error("%s: %s", domain.name, exc)
            plan = self._plan_one(
                domain, stage, claim, Halt(EngineHalt.STEP_ERROR, str(exc)), attempts
            )
        return _Pending(plan, stage, attempts)

    def _plan_one(
        self, domain: Domain, stage: Stage, claim: Claim, outcome: Outcome, attempts: int
    ) -> Planned:
        return plan_outcome(
            domain,
            claim,
            stage.name,
            outcome,
            now=self.now,
            max_attempts=self.settings.max_attempts,
            retry_base=self.settings.retry_base,
            retry_max=self.settings.retry_max,
            attempts=attempts,
        )

    # -- saving ---------------------------------------------------------------------------

    def _flush(
        self,
        conn: Connection,
        domain: Domain,
        pending: Sequence[tuple[int, _Pending]],
        results: list[Applied | None],
    ) -> None:
        """Save pending outcomes in one transaction; on any error, one at a time."""
        if not pending:
            return
        try:
            try:
                with conn.begin():
                    held = save_planned(conn, domain, [p.plan for _, p in pending], self.now)
            except Exception:
                if conn.invalidated:
                    raise
                held = [self._save_alone(conn, domain, p) for _, p in pending]
        finally:
            # Only now that the outcomes are saved (the claims given back) may the lease lapse.
            for _, item in pending:
                if item.beat is not None:
                    item.beat.stop()
        # Counted and told once per batch: a counter or a wake-up per record is measurable.
        counts: dict[tuple[str, str], int] = {}
        pause: float | None = None
        for (index, item), ok in zip(pending, held, strict=True):
            applied = results[index] = self._report(domain, item, ok)
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

    def _save_alone(self, conn: Connection, domain: Domain, item: _Pending) -> bool:
        """Save one outcome; a save that raises is a failed attempt with its error (retried,
        then halted ``attempts_exhausted`` with that error)."""
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
        log.error(
            "%s %s: %s",
            domain.noun,
            item.plan.claim.record_id,
            redact(outcome.error),
        )
        item.plan = self._plan_one(domain, item.stage, item.plan.claim, outcome, item.attempts)
        with conn.begin():
            return save_planned(conn, domain, [item.plan], self.now)[0]

    def _report(self, domain: Domain, item: _Pending, held: bool) -> Applied | None:
        applied = report(domain, item.plan, held)
        if item.produced and (not applied.held or applied.outcome == "halted"):
            self._discard_leftovers(domain, item.plan.claim, item.produced)
        if not applied.held:
            self._lost(domain, item.stage.name, item.plan.claim)
            return None
        return applied

    def _discard_leftovers(self, domain: Domain, claim: Claim, produced: Sequence[str]) -> None:
        """Remove what a step stored without a journal row, if its record halted or is gone.

        A record that merely lost its claim to another holder is left alone: that holder may
        be writing the same keys right now (the periodic sweep takes true leftovers).
        """
        if domain.discard is None or not produced:
            return
        try:
            with self.engine.connect() as conn:
                record = queries.read_record(conn, domain, claim.record_id)
            if record is not None and record["halted_at"] is None:
                return
            domain.discard(self.engine, produced)
        except Exception:  # the sweep removes them later
            log.warning("could not remove the leftovers of a step", exc_info=True)

    def _timer(self, domain: str, stage: str) -> Any:
        # Labelled children looked up once: a label lookup per record is measurable.
        key = (domain, stage)
        if key not in self._timers:
            self._timers[key] = STEP_SECONDS.labels(domain, stage)
        return self._timers[key]

    def _counter(self, domain: str, stage: str, outcome: str) -> Any:
        key = (domain, stage, outcome)
        if key not in self._counters:
            self._counters[key] = STEP_OUTCOMES.labels(domain, stage, outcome)
        return self._counters[key]

    def _lost(self, domain: Domain, stage: str, claim: Claim) -> None:
        # P6: logged once, counted, nothing written.
        CLAIMS_LOST.labels(domain.name, stage).inc()
        log.warning(
            "%s %s: claim lost during %s; result discarded",
            domain.noun,
            claim.record_id,
            stage,
        )


def _records(rows: Sequence[Row[Any]]) -> list[dict[str, Any]]:
    """Rows as dicts; the column names are read once per result (``Row._fields`` and
    ``Row._asdict`` rebuild them for every row)."""
    if not rows:
        return []
    fields = rows[0]._fields
    return [dict(zip(fields, row, strict=True)) for row in rows]


def _describe(exc: BaseException) -> str:
    """The error's kind and the first line of its message (a driver's message is multi-line)."""
    cause = exc.orig if isinstance(exc, DBAPIError) and exc.orig is not None else exc
    lines = str(cause).strip().splitlines()
    return f"{type(exc).__name__}: {lines[0] if lines else ''}".rstrip(": ")


class _Heartbeat:
    """Extends a long step's lease every ``lease / 3`` seconds until stopped or lost (M8)."""

    def __init__(self, ctx: StepContext) -> None:
        self._ctx = ctx
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._run, name="conveyor-heartbeat", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._done.set()
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
