"""How ``conveyor worker`` ends: on SIGINT/SIGTERM, or once drained (``conveyor workers drain``
asked it to stop claiming, and its running steps have finished); and when ``records add`` and
``media add``, whose workers register as a worker process too, stop waiting on them."""

from __future__ import annotations

import threading

from conveyor.cli.output import note
from conveyor.pipeline import WorkerPool
from conveyor.processes import ProcessRegistry

__all__ = ["StopOrDrain", "wait_for_stop_or_drain"]

# Seconds between looks at the pool while a drain waits for running steps.
_DRAIN_CHECK = 0.2


class StopOrDrain:
    """Set once the command is asked to stop (a signal) or its process to drain: either way its
    workers claim nothing more, and what is left waits for a ``conveyor worker``."""

    def __init__(self, stop: threading.Event, registry: ProcessRegistry) -> None:
        self._stop = stop
        self._drain = registry.drain

    def is_set(self) -> bool:
        """True once either was asked."""
        return self._stop.is_set() or self._drain.is_set()


def wait_for_stop_or_drain(
    stop: threading.Event, registry: ProcessRegistry, pool: WorkerPool
) -> None:
    """Return on a stop signal, or when a drain was asked and no thread holds a claim."""
    while not stop.is_set():
        if registry.drain.wait(timeout=0.5):
            break
    if stop.is_set():
        return
    note("draining: no new claims; waiting for the running steps to finish")
    # Idle at two looks in a row: a thread that passed its last may_claim just before the
    # drain has had time to show its claim.
    idle = 0
    while not stop.is_set() and idle < 2:
        idle = idle + 1 if not any(pool.busy().values()) else 0
        stop.wait(_DRAIN_CHECK)
    if not stop.is_set():
        note("drained: every running step finished; exiting")
