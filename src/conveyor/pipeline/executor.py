"""Run one claimed record's step: start it, watchdog, call, plan the outcome (P6-P12, D3, D18).

:meth:`Executor.execute` is what each executor thread of a lane runs for every record its
producer hands it (:mod:`conveyor.pipeline.producer`); the outcome goes to the lane's completer
(:mod:`conveyor.pipeline.completer`). Every path ends in exactly one of: a planned outcome to
save, a release (stop), or a lost claim that writes nothing and is logged once and counted
(P6).

:meth:`Executor.claim`, :meth:`Executor.run_once`, :meth:`Executor.run_claimed` and
:meth:`Executor.run_batch` do the same synchronously, for one caller's thread (tools, tests).
"""

from __future__ import annotations

import logging
import threading
import time
import traceback
from collections.abc import Callable
from typing import Any

from sqlalchemy import Connection, Engine

from conveyor.clock import Clock
from conveyor.config import PipelineSettings
from conveyor.db.engine import autocommit
from conveyor.db.notify import announce_work
from conveyor.errors import ClaimLost, Unprocessable
from conveyor.pipeline import queries
from conveyor.pipeline.claims import Claim, Held
from conveyor.pipeline.completer import (
    Finished,
    Saver,
    discard_leftovers,
    log_lost,
    plan,
)
from conveyor.pipeline.context import Heartbeat, StepContext, StopRequested
from conveyor.pipeline.halts import EngineHalt
from conveyor.pipeline.lifecycle import Applied
from conveyor.pipeline.metrics import STEP_SECONDS
from conveyor.pipeline.outcomes import Fail, Halt, Outcome, Postpone
from conveyor.pipeline.producer import Job, LaneClaims, claim_jobs, records_of
from conveyor.pipeline.redact import redact
from conveyor.pipeline.stages import Domain, Stage

__all__ = ["Executor"]

log = logging.getLogger("conveyor.pipeline")

#: Records remembered per outage as told to wait (so that each is told once): past this many
#: the longest-told is forgotten, and at worst told again (one more journal line), however
#: large the backlog an outage holds up.
WAITING_MAX = 10_000


class Executor:
    """Runs steps of claimed records.

    Args:
        engine: the database.
        clock: time source: the database's clock for decisions unless it is a test clock that
            drives the database's time (D17).
        settings: ``[pipeline]`` settings (limits, attempts, back-off).
        stopping: set when the pool stops; long steps see it through
            :meth:`StepContext.check`.
        on_advance: called after a record advanced (to wake workers of other lanes).
        on_pause: called with the pause in seconds after a postpone or a retryable failure,
            so idle workers wake when it ends rather than at the next poll.
        held: the pool's held claims (a released or lost one is forgotten).
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
        held: Held | None = None,
    ) -> None:
        self.engine = engine
        self.clock = clock
        self.settings = settings
        self.stopping = stopping or threading.Event()
        self.now = queries.now_of(clock)
        self.held = held
        self.saver = Saver(
            engine, settings, self.now, held=held, on_advance=on_advance, on_pause=on_pause
        )
        self._lanes: dict[tuple[str, str], LaneClaims | None] = {}
        self._timers: dict[tuple[str, str], Any] = {}
        # The records told (journaled) to wait for each outage, oldest told first:
        # (service, its start) → (domain, record id). A record leaves when its claim ends
        # any other way than waiting (its outcome saved, lost, released), and past
        # WAITING_MAX; all of them when the outage ends.
        self._waiting: dict[tuple[int, float], dict[tuple[str, int], None]] = {}
        self._waiting_lock = threading.Lock()

    # -- one claimed record ---------------------------------------------------------------

    def execute(self, job: Job) -> Finished | None:
        """Start ``job``'s step (unless the pool stops), run it, plan its outcome.

        A prefetched job is started first (its full lease from now, D18); if its claim is gone
        by then (it lapsed and another worker took the record), nothing runs.

        A step that raises what one of its domain's :attr:`~conveyor.pipeline.Domain.outages`
        counts as that service's outage (the object store refusing, timing out, answering
        5xx) is not a failure of the record: it is postponed (D6: no attempt counted) with a
        pause that grows with the outage, half of its length so far, between
        ``[pipeline] retry_base`` and ``retry_max`` seconds. Its journal says once per outage
        that it waits, and why; the process logs the outage once (:mod:`conveyor.db.outage`).
        The stuck watchdog (D3) still bounds the wait: postpones keep the countdown.

        Returns:
            The outcome to save, or None when there is nothing to save (released or lost).
        """
        domain, claim = job.domain, job.claim
        if self.stopping.is_set():
            self._release(domain, claim)
            return None
        record = job.record
        db_time = float(record.pop("_db_now"))
        read_at = job.read_at
        if record["claim_token"] != claim.token:
            self._forget(domain, claim)
            log_lost(domain, str(record["stage"]), claim)
            return None
        stage = domain.stage(record["stage"])
        if not job.started:
            # One statement in its own transaction: one round trip to a distant database.
            with self.engine.connect() as conn, autocommit(conn):
                started = queries.mark_started(conn, domain, claim, self.now, stage.lease)
            if started is not None:
                db_time, read_at = started, time.monotonic()
            else:
                # Never started: another worker has it, nothing ran, nothing is counted.
                self._forget(domain, claim)
                log.info(
                    "%s %s: prefetched claim lapsed before its start",
                    domain.noun,
                    claim.record_id,
                )
                return None
        attempts = int(record["attempts"])
        began = record["work_started_at"]
        in_stage = 0.0 if began is None else db_time - float(began)
        limit = stage.work_limit(self.settings)
        if in_stage > limit:
            # D3, P10: the claimer halts a record whose work overstayed its stage.
            outcome: Outcome = Halt(
                EngineHalt.STUCK,
                f"in stage {stage.name} for {in_stage:.0f} s since its first claim, over the "
                f"{stage.work} work limit of {limit:.0f} s",
            )
            return self._finished(domain, stage, claim, outcome, attempts)
        return self._run_step(job, stage, attempts, db_time, read_at)

    def _run_step(
        self, job: Job, stage: Stage, attempts: int, db_time: float, read_at: float
    ) -> Finished | None:
        domain, claim = job.domain, job.claim
        assert stage.step is not None  # the claim selects only non-terminal stages
        ctx = StepContext(
            domain=domain,
            stage=stage,
            record=job.record,
            claim=claim,
            engine=self.engine,
            clock=self.clock,
            db_time=db_time,
            read_at=read_at,
            stopping=self.stopping,
            now_sql=self.now,
        )
        beat = Heartbeat(ctx) if stage.heartbeat else None
        # The heartbeat runs until the claim is given back: by the release on stop here, or by
        # the outcome's save (the completer), so the lease never lapses between the step's end
        # and its save, and a beat racing the release finds the claim gone.
        handed_on = False
        started = time.monotonic()
        try:
            if beat:
                beat.start()
            outcome = stage.step(ctx)
            self._stop_waiting(domain, claim)
            handed_on = True
            if ctx.produced:
                # It stored an object: the store answers (part of ending an outage of it).
                for service in domain.outages:
                    service.succeeded()
        except ClaimLost:
            self._forget(domain, claim)
            log_lost(domain, stage.name, claim)
            discard_leftovers(self.engine, domain, claim, ctx.produced)
            return None
        except StopRequested:
            self._release(domain, claim)
            return None
        except Unprocessable as exc:
            self._stop_waiting(domain, claim)
            outcome = Halt(exc.reason, exc.message)
            handed_on = True
        except Exception as exc:
            waits = self._outage_wait(domain, claim, exc)
            if waits is not None:
                outcome = waits
            else:
                self._stop_waiting(domain, claim)
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
            self._timer(domain.name, stage.name).observe(time.monotonic() - started)
        if ctx.lost.is_set():
            if beat:
                beat.stop()
            self._forget(domain, claim)
            log_lost(domain, stage.name, claim)
            discard_leftovers(self.engine, domain, claim, ctx.produced)
            return None
        try:
            finished = self._finished(domain, stage, claim, outcome, attempts)
        except BaseException:
            if beat:
                beat.stop()
            raise
        finished.produced = ctx.produced
        finished.beat = beat
        return finished

    def _outage_wait(self, domain: Domain, claim: Claim, exc: Exception) -> Postpone | None:
        """The postpone of a step that met an outage of a service its domain depends on, or
        None when ``exc`` is no such outage (see :meth:`execute`)."""
        for service in domain.outages:
            if not service.failed(exc, f"{domain.noun} step"):
                continue
            since = service.since
            lasted = 0.0 if since is None else max(0.0, service.clock() - since)
            delay = min(self.settings.retry_max, max(self.settings.retry_base, lasted / 2))
            key = (id(service), -1.0 if since is None else since)
            with self._waiting_lock:
                for old in [k for k in self._waiting if k[0] == key[0] and k != key]:
                    del self._waiting[old]  # an outage that has ended
                told = self._waiting.setdefault(key, {})
                who = (domain.name, claim.record_id)
                first = who not in told
                told[who] = None
                while len(told) > WAITING_MAX:
                    del told[next(iter(told))]
            cause = redact(f"{type(exc).__name__}: {exc}".splitlines()[0])
            state = "is full" if service.full else "does not answer"
            note = f"waiting for the {service.service}, which {state}: {cause}"
            return Postpone(delay, note=note if first else None)
        return None

    def _finished(
        self, domain: Domain, stage: Stage, claim: Claim, outcome: Outcome, attempts: int
    ) -> Finished:
        planned = plan(self.settings, self.now, domain, stage, claim, outcome, attempts)
        return Finished(domain, planned, stage, attempts)

    def _release(self, domain: Domain, claim: Claim) -> None:
        with self.engine.begin() as conn:
            if queries.release_claim(conn, domain, claim, self.now):
                announce_work(conn)  # another worker takes it now, not at its next poll
        self._forget(domain, claim)
        log.info("%s %s released on stop", domain.noun, claim.record_id)

    def _forget(self, domain: Domain, claim: Claim) -> None:
        if self.held is not None:
            self.held.drop(domain, [claim])
        self._stop_waiting(domain, claim)

    def _stop_waiting(self, domain: Domain, claim: Claim) -> None:
        """Forget that ``claim``'s record was told to wait: its step ended another way (or
        its claim is gone), so a later outage, or this one met again, is said again."""
        if not self._waiting:  # the common case, without the lock
            return
        who = (domain.name, claim.record_id)
        with self._waiting_lock:
            for told in self._waiting.values():
                told.pop(who, None)

    def _timer(self, domain: str, stage: str) -> Any:
        # Labelled children looked up once: a label lookup per record is measurable.
        key = (domain, stage)
        if key not in self._timers:
            self._timers[key] = STEP_SECONDS.labels(domain, stage)
        return self._timers[key]

    # -- synchronous use ------------------------------------------------------------------

    def _lane(self, domain: Domain, lane: str) -> LaneClaims | None:
        key = (domain.name, lane)
        cached = self._lanes.get(key)
        if cached is None or cached.domain is not domain:
            # Built again for another binding of the same domain (its steps differ).
            cached = LaneClaims(domain, lane, self.now) if domain.lane_stages(lane) else None
            self._lanes[key] = cached
        return cached

    def claim(self, domain: Domain, lane: str) -> Claim | None:
        """Claim the next record of ``domain`` in ``lane`` without starting a step: the stage's
        lease, and no start mark (its lapse counts nothing). None when there is no work (P12).
        """
        claims = self._lane(domain, lane)
        if claims is None:
            return None
        with self.engine.connect() as conn, conn.begin():
            got = queries.claim_with(conn, claims.unstarted, 1)
        return got[0] if got else None

    def run_once(self, domain: Domain, lane: str) -> bool:
        """Claim one record of ``domain`` in ``lane``, run its step and save the outcome.

        Returns:
            False when there was no work now (P12), True when a record was handled.
        """
        with self.engine.connect() as conn:
            return self.run_batch(conn, domain, lane, limit=1) > 0

    def run_batch(self, conn: Connection, domain: Domain, lane: str, *, limit: int) -> int:
        """Claim up to ``limit`` records in one statement, run their steps one after another,
        save every outcome in one transaction (each guarded by its own token).

        Returns:
            How many records were claimed (0: no work now, P12).
        """
        claims = self._lane(domain, lane)
        if claims is None:
            return 0
        jobs = claim_jobs(conn, claims, limit)
        done = [f for f in (self.execute(job) for job in jobs) if f is not None]
        if done:
            self.saver.save(conn, done)
        return len(jobs)

    def run_claimed(self, domain: Domain, claim: Claim) -> Applied | None:
        """Start and run the step for an existing claim; save its outcome if the claim holds.

        Returns:
            What was written, or None when the claim was released (stop) or vanished.
        """
        with self.engine.connect() as conn:
            with conn.begin():
                rows = queries.read_claimed(
                    conn, queries.read_statement(domain, self.now), [claim.record_id]
                )
            if not rows:
                log_lost(domain, "?", claim)
                return None
            (record,) = records_of(rows)
            job = Job(domain, claim, record, time.monotonic(), started=False)
            finished = self.execute(job)
            if finished is None:
                return None
            return self.saver.save(conn, [finished])[0]
