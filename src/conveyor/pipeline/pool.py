"""The worker pool: per lane a producer, its executors and a completer; one rescuer (D8, M7, M8).

The shape River, Oban and Sidekiq converged on. For each lane with workers, this process runs:

* a **producer** (:mod:`conveyor.pipeline.producer`) that claims, in one statement, at most as
  many records as the lane has idle executors (plus ``[pipeline] prefetch``);
* that many **executors** (:mod:`conveyor.pipeline.executor`), each running one record's step
  at a time, started the moment it was claimed;
* a **completer** (:mod:`conveyor.pipeline.completer`) that saves finished outcomes in batches
  as they come, each guarded by its own token, never behind a running step.

One **rescuer** (:mod:`conveyor.pipeline.rescuer`) turns the lapsed claims of lost workers into
failed attempts (D18). A lane with 0 workers is legal: its records are accepted and wait (D8).
Idle producers sleep until a wake-up or ``[pipeline] poll_interval``; they never spin.

Stopping (SIGINT/SIGTERM in the CLI): no new claims; claims no executor has started are
released at once; running steps get ``stop_grace`` seconds to finish (long steps see the stop
through :meth:`StepContext.check` and release their claim); finished outcomes are saved; any
claim still held after the grace period is released so it is claimable at once.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping, Sequence

from sqlalchemy import Engine

from conveyor.clock import Clock
from conveyor.config import PipelineSettings
from conveyor.db.notify import Notifier, announce_work
from conveyor.pipeline import queries
from conveyor.pipeline.claims import Held, mint_token
from conveyor.pipeline.completer import Completer
from conveyor.pipeline.executor import Executor
from conveyor.pipeline.metrics import BACKLOG
from conveyor.pipeline.producer import Producer
from conveyor.pipeline.rescuer import Rescuer
from conveyor.pipeline.stages import Domain

__all__ = ["WorkerPool"]

log = logging.getLogger("conveyor.pool")


class WorkerPool:
    """Producers, executors and completers for the given lanes, and a rescuer.

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
        #: Asked before each claim: False keeps the lane's producer from claiming (a paused
        #: lane, a draining process; see conveyor.processes). Running steps are not touched.
        self.may_claim: Callable[[str], bool] = lambda _lane: True
        self.holder = mint_token()[:12]
        """This process's name for its claims (a worker registry may show it)."""
        self.held = Held()
        self.now = queries.now_of(clock)
        self._stopping = threading.Event()
        self._producers: list[Producer] = []
        self._completers: list[Completer] = []
        self._rescuer: Rescuer | None = None
        for lane in self.lanes:
            if not any(d.lane_stages(lane) for d in self.domains):
                log.info("lane %r has workers but no stages", lane)

    @property
    def executor(self) -> Executor:
        """A fresh executor bound to this pool's stop flag, wake-ups and held claims."""
        return Executor(
            self.engine,
            self.clock,
            self.settings,
            stopping=self._stopping,
            on_advance=self.notifier.wake_local,
            on_pause=self._wake_after_pause,
            held=self.held,
        )

    def _wake_after_pause(self, delay: float) -> None:
        # Only short pauses get a timer; long ones are found by the regular poll.
        if delay < self.settings.poll_interval * 10:
            self.notifier.wake_after(delay)

    def start(self) -> None:
        """Start every lane's threads and the rescuer."""
        self.notifier.start_listening()
        BACKLOG.watch(self.engine, self.domains, self.clock)
        for lane, count in self.lanes.items():
            domains = [d for d in self.domains if d.lane_stages(lane)]
            if count <= 0 or not domains:
                continue
            executor = self.executor
            completer = Completer(self.engine, executor.saver, name=f"conveyor-completer-{lane}")
            producer = Producer(
                self.engine,
                lane,
                domains,
                workers=count,
                prefetch=self.settings.prefetch,
                poll_interval=self.settings.poll_interval,
                now=self.now,
                execute=executor.execute,
                complete=completer.put,
                held=self.held,
                notifier=self.notifier,
                stopping=self._stopping,
                holder=self.holder,
                paused=lambda lane: not self.may_claim(lane),
            )
            completer.start()
            producer.start()
            self._completers.append(completer)
            self._producers.append(producer)
        if any(count > 0 for count in self.lanes.values()):
            self._rescuer = Rescuer(
                self.engine,
                self.domains,
                self.settings,
                self.now,
                stopping=self._stopping,
                on_rescued=self._wake_after_pause,
            )
            self._rescuer.start()
        log.info("worker pool started: %s", ", ".join(f"{k}={v}" for k, v in self.lanes.items()))

    @property
    def stopping(self) -> bool:
        """True once :meth:`stop` was called."""
        return self._stopping.is_set()

    def stop(self, grace: float | None = None) -> None:
        """Stop claiming; release unstarted claims at once; let running steps finish for
        ``grace`` seconds; save finished outcomes; release whatever is still held.

        Args:
            grace: seconds to wait; ``[pipeline] stop_grace`` when None.
        """
        self._stopping.set()
        self.notifier.wake_local()
        for producer in self._producers:
            producer.wake()
        deadline = time.monotonic() + (self.settings.stop_grace if grace is None else grace)
        for producer in self._producers:
            producer.join_producer(deadline)
        for producer in self._producers:
            producer.join(deadline)
        for completer in self._completers:
            # Finished outcomes are saved even when the grace is spent (a quick transaction).
            completer.close(max(1.0, deadline - time.monotonic()))
        if self._rescuer is not None:
            self._rescuer.join(1.0)
        for domain, claim in self.held.all():
            with self.engine.begin() as conn:
                if queries.release_claim(conn, domain, claim, self.now):
                    announce_work(conn)  # another worker takes it now, not at its next poll
            self.held.drop(domain, [claim])
            log.info("%s %s released on stop", domain.noun, claim.record_id)
        self.notifier.close()

    def running(self) -> bool:
        """True when started, not stopping, and every lane's threads are alive."""
        return (
            (bool(self._producers) or not any(self.lanes.values()))
            and not self.stopping
            and all(p.alive() for p in self._producers)
        )

    def busy(self) -> dict[str, int]:
        """Lane → executors running a step now, or about to (a record claimed for them)."""
        counts = dict.fromkeys(self.lanes, 0)
        for producer in self._producers:
            counts[producer.lane] += producer.busy()
        return counts

    def holding(self) -> list[tuple[str, int, str]]:
        """The claims held now: ``(domain, record id, claim token)``."""
        return [(domain.name, claim.record_id, claim.token) for domain, claim in self.held.all()]

    def join(self) -> None:
        """Wait for every thread to end (after :meth:`stop`)."""
        for producer in self._producers:
            producer.join()
        for completer in self._completers:
            completer.close()
