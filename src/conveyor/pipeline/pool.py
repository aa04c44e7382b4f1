"""The worker pool: N identical worker threads per lane, dispatch by stage (D8, M7, M8).

Each worker of lane L loops over the domains, claims a record whose stage runs in L, and runs
its step. A lane with 0 workers is legal: its records are accepted and wait (D8). Idle workers
sleep until a wake-up or ``[pipeline] poll_interval``; they never spin.

Stopping (SIGINT/SIGTERM in the CLI): no new claims; running steps get ``stop_grace`` seconds to
finish, long steps see the stop through :meth:`StepContext.check` and release their claim; any
claim still held after the grace period is released so it is claimable at once.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping, Sequence

from sqlalchemy import Connection, Engine

from conveyor.clock import Clock
from conveyor.config import PipelineSettings
from conveyor.db import outage
from conveyor.db.notify import Notifier
from conveyor.pipeline import queries
from conveyor.pipeline.executor import Executor
from conveyor.pipeline.metrics import BACKLOG
from conveyor.pipeline.stages import Domain

__all__ = ["WorkerPool"]

log = logging.getLogger("conveyor.pool")

# Seconds a worker backs off after an unexpected error (e.g. the database went away), so a
# broken connection is retried without flooding the log.
_ERROR_BACKOFF = 1.0


class WorkerPool:
    """Worker threads for the given lanes.

    Args:
        engine: the database.
        domains: the domains whose records the workers move.
        lanes: lane name → worker count (0 legal).
        clock: time source.
        settings: ``[pipeline]`` settings.
        notifier: wake-up transport; a private one when omitted.
    """

    def __init__(
        self,
        engine: Engine,
        domains: Sequence[Domain],
        lanes: Mapping[str, int],
        *,
        clock: Clock,
        settings: PipelineSettings,
        notifier: Notifier | None = None,
    ) -> None:
        self.engine = engine
        self.domains = list(domains)
        self.lanes = dict(lanes)
        self.clock = clock
        self.settings = settings
        self.notifier = notifier or Notifier(engine)
        self._stopping = threading.Event()
        self._threads: list[threading.Thread] = []
        self._executors: list[Executor] = []
        self._lane_executors: list[tuple[str, Executor]] = []
        #: Asked before each claim: False keeps the lane's workers from claiming (a paused
        #: lane, a draining process; see conveyor.processes). Running steps are not touched.
        self.may_claim: Callable[[str], bool] = lambda _lane: True
        for lane in self.lanes:
            if not any(d.lane_stages(lane) for d in self.domains):
                log.info("lane %r has workers but no stages", lane)

    @property
    def executor(self) -> Executor:
        """A fresh executor bound to this pool's stop flag and wake-ups."""
        executor = Executor(
            self.engine,
            self.clock,
            self.settings,
            stopping=self._stopping,
            on_advance=self.notifier.wake_local,
            on_pause=self._wake_after_pause,
        )
        self._executors.append(executor)
        return executor

    def _wake_after_pause(self, delay: float) -> None:
        # Only short pauses get a timer; long ones are found by the regular poll.
        if delay < self.settings.poll_interval * 10:
            self.notifier.wake_after(delay)

    def start(self) -> None:
        """Start every worker thread."""
        self.notifier.start_listening()
        BACKLOG.watch(self.engine, self.domains, self.clock)
        for lane, count in self.lanes.items():
            for index in range(count):
                executor = self.executor
                self._lane_executors.append((lane, executor))
                thread = threading.Thread(
                    target=self._work,
                    args=(lane, executor),
                    name=f"conveyor-{lane}-{index}",
                    daemon=True,
                )
                thread.start()
                self._threads.append(thread)
        log.info("worker pool started: %s", ", ".join(f"{k}={v}" for k, v in self.lanes.items()))

    @property
    def stopping(self) -> bool:
        """True once :meth:`stop` was called."""
        return self._stopping.is_set()

    def stop(self, grace: float | None = None) -> None:
        """Stop claiming, let running steps finish for ``grace`` seconds, release the rest.

        Args:
            grace: seconds to wait; ``[pipeline] stop_grace`` when None.
        """
        self._stopping.set()
        self.notifier.wake_local()
        deadline = self.settings.stop_grace if grace is None else grace
        for thread in self._threads:
            thread.join(timeout=deadline)
        leftovers = [held for executor in self._executors for held in executor.held_claims()]
        now = queries.now_of(self.clock)
        for domain, claim in leftovers:
            with self.engine.begin() as conn:
                queries.release_claim(conn, domain, claim, now)
            log.info("%s %s released on stop", domain.noun, claim.record_id)
        self.notifier.close()

    def running(self) -> bool:
        """True when started, not stopping, and every worker thread is alive."""
        return (
            (bool(self._threads) or not any(self.lanes.values()))
            and not self.stopping
            and all(t.is_alive() for t in self._threads)
        )

    def busy(self) -> dict[str, int]:
        """Lane → worker threads holding a claim (running a step) now."""
        counts = dict.fromkeys(self.lanes, 0)
        for lane, executor in self._lane_executors:
            if executor.held_claims():
                counts[lane] += 1
        return counts

    def holding(self) -> list[tuple[str, int, str]]:
        """The claims held now: ``(domain, record id, claim token)``."""
        return [
            (domain.name, claim.record_id, claim.token)
            for executor in self._executors
            for domain, claim in executor.held_claims()
        ]

    def join(self) -> None:
        """Wait for every worker thread to end (after :meth:`stop`)."""
        for thread in self._threads:
            thread.join()

    def _work(self, lane: str, executor: Executor) -> None:
        domains = [d for d in self.domains if d.lane_stages(lane)]
        while not self._stopping.is_set():
            try:
                # One connection per worker loop: no checkout per statement.
                with self.engine.connect() as conn:
                    self._loop(conn, lane, executor, domains)
            except Exception as exc:
                # An outage is told once per process (and its end once), not once per thread
                # per second.
                if not outage.DATABASE.failed(exc, f"{lane} worker"):
                    log.exception("worker of lane %s: unexpected error", lane)
                self._stopping.wait(_ERROR_BACKOFF)

    def _loop(
        self, conn: Connection, lane: str, executor: Executor, domains: Sequence[Domain]
    ) -> None:
        while not self._stopping.is_set():
            since = self.notifier.generation
            worked = False
            for domain in domains:
                if self._stopping.is_set() or not self.may_claim(lane):
                    break
                worked = executor.run_batch(conn, domain, lane) > 0 or worked
                outage.DATABASE.succeeded()
            if not worked:
                self.notifier.wait(since, self.settings.poll_interval)
