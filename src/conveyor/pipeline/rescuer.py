"""Rescue records whose worker was lost: a lapsed claim on a started step is a failed attempt
(D18), and the record is then taken before those not begun in its stage (D19).

A claim whose step had started and whose lease ran out means its worker died, hung or lost its
database. The rescuer turns each such claim into the outcome ``Fail("worker lost")``, saved as
any failure is (guarded by the lapsed claim's own token, so a worker that is merely late and
saves first wins, and two rescuers never count one loss twice): ``attempts`` + 1, the usual
retry pause, a ``failed`` journal row with the text ``worker lost`` — or, at ``[pipeline]
max_attempts``, the halt ``attempts_exhausted`` with that reason. A record that keeps killing
its worker thus halts after the attempts limit, not ``stuck`` an hour later.

A claim that lapses before its step started (a prefetched record of a dead process) costs
nothing: the claim itself treats it as free (:func:`~conveyor.pipeline.queries.claimable`).

A step that hangs in a heartbeat stage never lets its lease lapse (its heartbeat renews it),
and the stuck check at claim time (D3) never sees a record that is never claimed again. So the
rescuer also halts ``stuck`` a record whose step is still running once its work in the stage
has taken longer than the stage's limit (``[pipeline] own_work_limit`` or
``foreign_work_limit``), guarded by the running step's own token: its heartbeat then finds the
claim gone, a step that checks (:meth:`~conveyor.pipeline.StepContext.check`) stops, and
whatever it returns is refused (P6). The thread running it stays busy until it returns.

Every pool runs one :class:`Rescuer` thread, every ``[pipeline] poll_interval``.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence

from sqlalchemy import Engine
from sqlalchemy.sql import ColumnElement

from conveyor.config import PipelineSettings
from conveyor.db import outage
from conveyor.db.engine import autocommit
from conveyor.pipeline import queries
from conveyor.pipeline.completer import plan
from conveyor.pipeline.halts import EngineHalt
from conveyor.pipeline.lifecycle import Planned, report, save_planned
from conveyor.pipeline.metrics import STEP_OUTCOMES
from conveyor.pipeline.outcomes import Fail, Halt
from conveyor.pipeline.stages import Domain

__all__ = ["WORKER_LOST", "Rescuer", "rescue"]

log = logging.getLogger("conveyor.pipeline")

WORKER_LOST = "worker lost"
"""The error text of a lapsed claim on a started step (D18)."""

# Lapsed claims rescued per transaction.
_BATCH = 100


def rescue(
    engine: Engine, domain: Domain, settings: PipelineSettings, now: ColumnElement[float]
) -> int:
    """Count every lapsed started claim of ``domain`` as a failed attempt (D18), and halt
    ``stuck`` every record whose step still runs past its stage's limit (D3).

    Returns:
        How many records were rescued (failed or halted).
    """
    limits = {s.name: s.work_limit(settings) for s in domain.stages if not s.terminal}
    # Looked for first by a read that locks nothing: on PostgreSQL one round trip instead of a
    # transaction of three, every poll of every worker process, and nearly always nothing.
    with engine.connect() as conn, autocommit(conn):
        if not queries.any_lapsed(conn, domain, now, limits):
            return 0
    total = 0
    while True:
        with engine.begin() as conn:
            lapsed = queries.lapsed_claims(conn, domain, now, _BATCH)
            plans = [
                plan(settings, now, domain, domain.stage(stage), claim, Fail(WORKER_LOST), tries)
                for claim, stage, tries in lapsed
            ]
            hung = queries.overstayed_claims(conn, domain, now, limits, _BATCH)
            plans += [
                plan(
                    settings,
                    now,
                    domain,
                    domain.stage(stage),
                    claim,
                    _overstay(domain, stage, seconds, limits[stage]),
                    tries,
                )
                for claim, stage, tries, seconds in hung
            ]
            if not plans:
                return total
            held = save_planned(conn, domain, plans, now)
        for planned, ok in zip(plans, held, strict=True):
            _told(domain, planned, ok)
        total += sum(held)
        if len(lapsed) < _BATCH and len(hung) < _BATCH:
            return total


def _overstay(domain: Domain, stage: str, seconds: float, limit: float) -> Halt:
    work = domain.stage(stage).work
    return Halt(
        EngineHalt.STUCK,
        f"in stage {stage} for {seconds:.0f} s since its first claim, over the {work} work "
        f"limit of {limit:.0f} s, its step still running and not returning",
    )


def _told(domain: Domain, planned: Planned, held: bool) -> None:
    """Log and count one rescued record."""
    applied = report(domain, planned, held)
    if not applied.held:
        return
    STEP_OUTCOMES.labels(domain.name, planned.stage, applied.outcome).inc()
    if planned.halt is not None and planned.halt.reason is EngineHalt.STUCK:
        log.warning(
            "%s %s: its step in %s ran past the stage's limit and was halted stuck; the "
            "worker thread running it stays busy until the step returns (restart that worker "
            "if it never does)",
            domain.noun,
            planned.claim.record_id,
            planned.stage,
        )
    elif applied.outcome != "halted":
        log.warning(
            "%s %s: its worker was lost during %s; retried after a pause",
            domain.noun,
            planned.claim.record_id,
            planned.stage,
        )


class Rescuer:
    """A pool's rescuing thread: :func:`rescue` for each domain every ``interval`` seconds.

    Args:
        engine: the database.
        domains: the domains to watch.
        settings: ``[pipeline]`` settings (attempts limit, retry pause, ``poll_interval``).
        now: the statements' time.
        stopping: set when the pool stops.
        on_rescued: called after records were rescued (wakes this process's producers).
    """

    def __init__(
        self,
        engine: Engine,
        domains: Sequence[Domain],
        settings: PipelineSettings,
        now: ColumnElement[float],
        *,
        stopping: threading.Event,
        on_rescued: Callable[[float], None] | None = None,
    ) -> None:
        self.engine = engine
        self.domains = list(domains)
        self.settings = settings
        self.now = now
        self.stopping = stopping
        self.on_rescued = on_rescued
        self._thread = threading.Thread(target=self._run, name="conveyor-rescuer", daemon=True)

    def start(self) -> None:
        """Start the thread."""
        self._thread.start()

    def join(self, timeout: float | None = None) -> None:
        """Wait for the thread to end (after the stop)."""
        self._thread.join(timeout)

    def run_once(self) -> int:
        """Rescue every domain once; returns how many records were rescued."""
        return sum(rescue(self.engine, d, self.settings, self.now) for d in self.domains)

    def _run(self) -> None:
        while not self.stopping.wait(self.settings.poll_interval):
            try:
                if self.run_once() and self.on_rescued is not None:
                    # The retry pause is at most retry_base at the first loss.
                    self.on_rescued(self.settings.retry_base)
                outage.DATABASE.succeeded()
            except Exception as exc:
                if not outage.DATABASE.failed(exc, "rescuer"):
                    log.exception("rescuer: unexpected error")
