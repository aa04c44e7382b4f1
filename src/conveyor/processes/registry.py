"""This process as the cluster sees it: its ``worker_processes`` row, and the controls it obeys.

A process that runs workers registers at start (host, pid, version, lanes and their worker
threads, started — on the database's clock, D17), then every ``[pipeline] poll_interval`` reads
the lane pauses and its own row (has an operator asked it to drain?), and every ``[pipeline]
beat_interval`` writes its last-seen time, how many threads of each lane run a step and the
claims it holds. A process unseen for ``[pipeline] lost_after`` seconds is shown as lost; on a
clean exit its row says ``stopped``.

The worker pool asks :meth:`ProcessRegistry.may_claim` before each claim: False for a paused
lane, and for every lane once the process drains. Running steps finish either way.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
from collections.abc import Callable, Mapping, Sequence

from sqlalchemy import Engine

from conveyor.clock import Clock
from conveyor.db import outage
from conveyor.processes import queries
from conveyor.processes.metrics import LANES

__all__ = ["ProcessRegistry"]

log = logging.getLogger("conveyor.processes")


class ProcessRegistry:
    """The row of this process and the pauses and drain request it obeys (thread-safe).

    Args:
        engine: the database.
        clock: time source (the database's clock is used unless it drives database time).
        lanes: lane → worker threads of this process.
        version: this Conveyor's version.
        poll_interval: seconds between reads of the controls (a pause takes effect within one).
        beat_interval: seconds between writes of the row.
        busy: lane → threads running a step now (from the pool).
        holding: the claims held now, as ``(domain, record id, claim token)`` (from the pool).
        host: the host's name (``socket.gethostname()`` when None).
        holder: the name the pool's claims carry (``claimed_by``), recorded with the row.
    """

    def __init__(
        self,
        engine: Engine,
        clock: Clock,
        *,
        lanes: Mapping[str, int],
        version: str,
        poll_interval: float,
        beat_interval: float,
        busy: Callable[[], Mapping[str, int]],
        holding: Callable[[], Sequence[tuple[str, int, str]]],
        host: str | None = None,
        holder: str | None = None,
    ) -> None:
        self.engine = engine
        self.clock = clock
        self.lanes = dict(lanes)
        self.version = version
        self.poll_interval = poll_interval
        self.beat_interval = beat_interval
        self.host = host or socket.gethostname()
        self.holder = holder
        self.id: int | None = None
        self._busy = busy
        self._holding = holding
        self._paused: frozenset[str] = frozenset()
        self._stop = threading.Event()
        #: Set once an operator asked this process to drain (``conveyor workers drain``).
        self.drain = threading.Event()
        self._thread = threading.Thread(target=self._run, name="conveyor-registry", daemon=True)

    def start(self) -> None:
        """Register, read the controls once, and start the thread that keeps both current.

        Raises:
            Exception: the database's error, when it fails for another reason than an outage
                (during an outage the thread registers once the database answers).
        """
        try:
            self._register()
        except Exception as exc:
            if not outage.DATABASE.failed(exc, "process registry"):
                raise
        LANES.watch(self.lanes, self._busy, lambda: self._paused, self.drain)
        self._thread.start()

    def _register(self) -> None:
        now = queries.now_of(self.clock)
        with self.engine.begin() as conn:
            self.id = queries.register_process(
                conn,
                now,
                host=self.host,
                pid=os.getpid(),
                version=self.version,
                lanes=self.lanes,
                holder=self.holder,
            )
            self._paused = frozenset(queries.paused_lanes(conn))
        log.info("registered as worker process %d on %s", self.id, self.host)

    def may_claim(self, lane: str) -> bool:
        """False while ``lane`` is paused, and for every lane once this process drains."""
        return lane not in self._paused and not self.drain.is_set()

    @property
    def paused(self) -> frozenset[str]:
        """The lanes paused cluster-wide at the last read."""
        return self._paused

    def stop(self) -> None:
        """Stop the thread and mark the row ``stopped`` (best effort: a database outage leaves
        it to be shown as lost)."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=10)
        if self.id is None:
            return
        try:
            with self.engine.begin() as conn:
                queries.stop_process(conn, self.id, queries.now_of(self.clock))
        except Exception as exc:
            if not outage.DATABASE.failed(exc, "process registry"):
                log.warning("could not mark worker process %d stopped: %s", self.id, exc)

    def _run(self) -> None:
        since_beat = 0.0
        while not self._stop.wait(self.poll_interval):
            since_beat += self.poll_interval
            try:
                self._tick(beat=since_beat >= self.beat_interval)
            except Exception as exc:
                if not outage.DATABASE.failed(exc, "process registry"):
                    log.warning("process registry: %s", exc, exc_info=True)
                continue
            if since_beat >= self.beat_interval:
                since_beat = 0.0

    def _tick(self, *, beat: bool) -> None:
        if self.id is None:  # the database was away at start
            self._register()
            return
        with self.engine.begin() as conn:
            if beat:
                row = queries.beat(
                    conn,
                    self.id,
                    queries.now_of(self.clock),
                    busy=self._busy(),
                    holding=self._holding(),
                )
            else:
                row = queries.process_by_id(conn, self.id)
            self._paused = frozenset(queries.paused_lanes(conn))
        if row is not None and row["state"] == "draining" and not self.drain.is_set():
            log.info("asked to drain: no new claims; exiting when the running steps finish")
            self.drain.set()
