"""Run one step for one claim: claim, read, watchdog, call, save if held (P1-P12, D3).

A worker calls :meth:`Executor.run_once` in a loop. Every path ends in exactly one of: no work
(returns False, no noise, P12), a conditional save, or a lost claim that writes nothing and is
logged once and counted (P6).
"""

from __future__ import annotations

import logging
import threading
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TypeVar

from sqlalchemy import Connection, Engine, RowMapping

from conveyor.clock import Clock
from conveyor.config import PipelineSettings
from conveyor.errors import ClaimLost, DeclarationError, MediaError
from conveyor.pipeline import queries
from conveyor.pipeline.claims import Claim, mint_token
from conveyor.pipeline.lifecycle import Applied, apply_outcome
from conveyor.pipeline.metrics import CLAIMS_LOST, STEP_OUTCOMES, STEP_SECONDS
from conveyor.pipeline.outcomes import Fail, Halt, Outcome
from conveyor.pipeline.redact import redact
from conveyor.pipeline.stages import Domain, Stage

__all__ = ["Executor", "StepContext", "StopRequested"]

log = logging.getLogger("conveyor.pipeline")
T = TypeVar("T")


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
        clock: the engine's clock.
    """

    domain: Domain
    stage: Stage
    record: RowMapping
    claim: Claim
    engine: Engine
    clock: Clock
    lost: threading.Event = field(default_factory=threading.Event)
    stopping: threading.Event = field(default_factory=threading.Event)

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
        """Extend the lease by the stage's lease from now, if the claim still holds.

        Raises:
            ClaimLost: the claim is gone; the step must stop without writing.
        """
        with self.engine.begin() as conn:
            held = queries.extend_claim(
                conn, self.domain, self.claim, self.clock.now() + self.stage.lease
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
            if not queries.touch_if_held(conn, self.domain, self.claim, self.clock.now()):
                tx.rollback()
                self.lost.set()
                raise ClaimLost(f"{self.domain.noun} {self.claim.record_id}: claim lost")
            return writes(conn)


class Executor:
    """Claims and runs steps of one lane.

    Args:
        engine: the database.
        clock: time source (FakeClock in tests).
        settings: ``[pipeline]`` settings (limits, attempts, back-off).
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

    def claim(self, domain: Domain, lane: str) -> Claim | None:
        """Claim the next record of ``domain`` in ``lane``; None when there is no work (P12)."""
        stages = domain.lane_stages(lane)
        if not stages:
            return None
        with self.engine.begin() as conn:
            return queries.claim_one(conn, domain, stages, self.clock.now(), mint_token())

    def run_once(self, domain: Domain, lane: str) -> bool:
        """Claim one record of ``domain`` in ``lane`` and run its step.

        Returns:
            False when there was no work now (P12), True when a record was handled.
        """
        claim = self.claim(domain, lane)
        if claim is None:
            return False
        self.run_claimed(domain, claim)
        return True

    def stuck_limit(self, stage: Stage) -> float:
        """The time-in-stage limit of ``stage``: own or foreign work (D3)."""
        if stage.work == "foreign":
            return self.settings.foreign_work_limit
        return self.settings.own_work_limit

    def run_claimed(self, domain: Domain, claim: Claim) -> Applied | None:
        """Run the step for an existing claim and write its outcome if the claim holds.

        Returns:
            What was written, or None when the claim was released (stop) or vanished.
        """
        with self.engine.connect() as conn:
            record = queries.read_record(conn, domain, claim.record_id)
        if record is None or record["claim_token"] != claim.token:
            self._lost(domain, record["stage"] if record else "?", claim)
            return None
        stage = domain.stage(record["stage"])
        now = self.clock.now()
        in_stage = now - float(record["state_entered_at"])
        limit = self.stuck_limit(stage)
        if in_stage > limit:
            # D3, P10: the claimer halts a record that overstayed its stage.
            outcome: Outcome = Halt(
                "stuck",
                f"in stage {stage.name} for {in_stage:.0f} s, over the {stage.work} work limit "
                f"of {limit:.0f} s",
            )
            return self._finish(domain, stage, claim, record, outcome)
        assert stage.step is not None  # claim_one selects only non-terminal stages
        ctx = StepContext(
            domain=domain,
            stage=stage,
            record=record,
            claim=claim,
            engine=self.engine,
            clock=self.clock,
            stopping=self.stopping,
        )
        beat = _Heartbeat(ctx) if stage.heartbeat else None
        started = time.monotonic()
        try:
            if beat:
                beat.start()
            outcome = stage.step(ctx)
        except ClaimLost:
            self._lost(domain, stage.name, claim)
            return None
        except StopRequested:
            with self.engine.begin() as conn:
                queries.release_claim(conn, domain, claim, self.clock.now())
            log.info("%s %s released on stop", domain.noun, claim.record_id)
            return None
        except MediaError as exc:
            outcome = Halt(exc.reason, exc.message)
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
        finally:
            if beat:
                beat.stop()
            STEP_SECONDS.labels(domain.name, stage.name).observe(time.monotonic() - started)
        if ctx.lost.is_set():
            self._lost(domain, stage.name, claim)
            return None
        return self._finish(domain, stage, claim, record, outcome)

    def _finish(
        self, domain: Domain, stage: Stage, claim: Claim, record: RowMapping, outcome: Outcome
    ) -> Applied | None:
        try:
            applied = self._apply(domain, stage, claim, record, outcome)
        except DeclarationError as exc:
            log.error("%s: %s", domain.name, exc)
            applied = self._apply(domain, stage, claim, record, Halt("step_error", str(exc)))
        if not applied.held:
            self._lost(domain, stage.name, claim)
            return None
        STEP_OUTCOMES.labels(domain.name, stage.name, applied.outcome).inc()
        if applied.outcome == "advanced" and self.on_advance is not None:
            self.on_advance()
        if applied.retry_in is not None and self.on_pause is not None:
            self.on_pause(applied.retry_in)
        return applied

    def _apply(
        self, domain: Domain, stage: Stage, claim: Claim, record: RowMapping, outcome: Outcome
    ) -> Applied:
        return apply_outcome(
            self.engine,
            domain,
            claim,
            stage.name,
            outcome,
            clock=self.clock,
            max_attempts=self.settings.max_attempts,
            retry_base=self.settings.retry_base,
            retry_max=self.settings.retry_max,
            attempts=int(record["attempts"]),
        )

    def _lost(self, domain: Domain, stage: str, claim: Claim) -> None:
        # P6: logged once, counted, nothing written.
        CLAIMS_LOST.labels(domain.name, stage).inc()
        log.warning(
            "%s %s: claim lost during %s; result discarded",
            domain.noun,
            claim.record_id,
            stage,
        )


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
