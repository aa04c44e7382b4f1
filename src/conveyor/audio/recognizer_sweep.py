"""Job folders of the local recognizer that nothing will ever collect, removed by a sweep.

A recording's job folder (``<storage root>/recognizer/<operation id>/``) is normally removed
when its answer is stored or its attempt fails. Some are left behind: the record was deleted
while its job waited or ran, it halted (``stuck``, ``attempts_exhausted``, ...) with its job
queued, running or finished, or a worker died between a job's end and the step that collects it.
Such a folder holds a copy of the audio's path and, worse, a queued job still takes a recognizer
slot and CPU. :func:`sweep_job_folders` removes (and stops) every job folder, older than a grace
period, whose attempt is not the live one of a record waiting for it: no attempt row (deleted),
an attempt that is finished or superseded, or a record halted for longer than the grace. Resuming
a halted record whose job was swept recognises it again as a new attempt (the local provider
costs nothing but time).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from sqlalchemy import Engine, RowMapping

from conveyor.audio import queries
from conveyor.periodic import Periodic
from conveyor.providers.base import RecognitionProvider
from conveyor.providers.local import LocalWhisperProvider

__all__ = ["JobFolderSweeper", "sweep_job_folders"]

log = logging.getLogger("conveyor.audio")

# Attempt states whose job may still be wanted: the call is in flight, or the operation runs.
_LIVE = frozenset({"started", "submitted"})


def sweep_job_folders(
    engine: Engine, provider: LocalWhisperProvider, *, grace: float, now: float
) -> list[str]:
    """Remove the local recognizer's job folders nothing will collect (see the module docstring).

    Args:
        grace: seconds a folder (and a record's halt) must be old before it is removed, so a
            job being created and a record halted a moment ago are left alone.
        now: the current time, epoch seconds.

    Returns:
        The operation ids whose folders were removed.
    """
    folders = [(name, changed) for name, changed in provider.job_folders() if now - changed > grace]
    if not folders:
        return []
    with engine.connect() as conn:
        attempts = queries.attempts_by_operation(conn, [name for name, _ in folders])
    removed = []
    for name, _ in folders:
        attempt = attempts.get(name)
        if attempt is not None and _wanted(attempt, grace=grace, now=now):
            continue
        provider.discard(name)  # stops a recognizer still working on it
        removed.append(name)
    return removed


def _wanted(row: RowMapping, *, grace: float, now: float) -> bool:
    """The job's attempt is its record's newest, still live, and the record waits for it."""
    if row["state"] not in _LIVE or row["id"] != row["latest_id"]:
        return False
    if row["stage"] not in ("normalized", "submitted"):
        return False
    halted_at = row["halted_at"]
    return halted_at is None or now - float(halted_at) <= grace


class JobFolderSweeper(Periodic):
    """Runs :func:`sweep_job_folders` every ``interval`` seconds in a daemon thread (beside the
    object sweep, with the same ``[storage] sweep_interval`` and ``sweep_grace``).

    Args:
        provider: makes the configured provider, called at the first sweep (so a process never
            loads it for nothing); any provider but the local one has no job folders, and the
            sweeper then stops.
    """

    def __init__(
        self,
        engine: Engine,
        provider: Callable[[], RecognitionProvider],
        *,
        interval: float,
        grace: float,
    ) -> None:
        super().__init__("conveyor-job-sweeper", interval, self._sweep)
        self.engine = engine
        self.provider = provider
        self.grace = grace

    def _sweep(self) -> bool:
        provider = self.provider()
        if not isinstance(provider, LocalWhisperProvider):
            return False  # no job folders in this process, ever
        removed = sweep_job_folders(self.engine, provider, grace=self.grace, now=time.time())
        if removed:
            log.info("removed %d recognizer job folders nothing will collect", len(removed))
        return True
