"""Objects without a journal row: removed by the step that made them, and by a periodic sweep.

Every physical object has exactly one ``files`` row (M1). A step writes its objects to the
store first and their rows in its save transaction; when that save does not happen the bytes
would stay forever. Two nets catch them, written only against store operations (list, delete)
and the journal, so they work the same on any store:

* :func:`discard_unjournaled`: the engine hands it the keys a step produced when the step's
  record halted or was deleted meanwhile; those without a row are removed at once;
* :func:`sweep_orphans` (in each worker process :data:`FIRST_SWEEP` seconds after it starts,
  then every ``[storage] sweep_interval`` seconds, :class:`Sweeper`; on demand with
  ``conveyor storage sweep``): every stored object under :data:`~.keys.OBJECT_PREFIXES` without a
  row and older than ``[storage] sweep_grace`` seconds is removed. The grace spares uploads
  still arriving and steps still running, whose rows are not written yet. The same sweep
  removes what writes cut short left behind (:meth:`ObjectStore.abort_stale_writes`: a
  temporary file in a folder, an unfinished multipart upload in a bucket) once it is older
  than the grace.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Collection
from dataclasses import dataclass

from sqlalchemy import Engine

from conveyor.objects.keys import OBJECT_PREFIXES
from conveyor.objects.queries import journaled_keys
from conveyor.objects.store import ObjectStore
from conveyor.periodic import Periodic
from conveyor.sizes import human_size

__all__ = [
    "FIRST_SWEEP",
    "SweepReport",
    "Sweeper",
    "discard_unjournaled",
    "sweep_orphans",
]

log = logging.getLogger("conveyor.objects")

#: Seconds from a worker's start to its first sweep: soon, so that a host restarted after a
#: crash cleans up what the crash left within minutes, not an interval later; not at once, so
#: that a whole cluster restarted together does not list the bucket in the same second.
FIRST_SWEEP = 60.0

# Keys looked up per journal query while sweeping.
_PAGE = 500


def discard_unjournaled(engine: Engine, store: ObjectStore, keys: Collection[str]) -> list[str]:
    """Remove those of ``keys`` that have no journal row; returns the keys removed."""
    if not keys:
        return []
    with engine.connect() as conn:
        kept = journaled_keys(conn, keys)
    removed = [k for k in keys if k not in kept]
    for key in removed:
        store.delete(key)
    return removed


@dataclass(frozen=True)
class SweepReport:
    """What a sweep found: objects looked at, keys and bytes removed (or, on a dry run, that
    would have been), and unfinished writes aborted (none on a dry run)."""

    examined: int
    removed: list[str]
    removed_bytes: int
    aborted: int = 0


def sweep_orphans(
    engine: Engine, store: ObjectStore, *, grace: float, now: float, dry_run: bool = False
) -> SweepReport:
    """Remove every stored object that has no journal row and is older than ``grace`` seconds.

    Args:
        grace: seconds an object may exist without a row (an upload arriving, a step running).
        now: the current time, epoch seconds (objects' modification times are compared to it).
        dry_run: report only.
    """
    examined = 0
    removed: list[str] = []
    removed_bytes = 0
    page: list[tuple[str, int]] = []

    def settle() -> None:
        nonlocal removed_bytes
        with engine.connect() as conn:
            kept = journaled_keys(conn, [key for key, _ in page])
        for key, size in page:
            if key not in kept:
                if not dry_run:
                    store.delete(key)
                removed.append(key)
                removed_bytes += size
        page.clear()

    listed_objects = (obj for prefix in OBJECT_PREFIXES for obj in store.list(prefix))
    for listed in listed_objects:
        examined += 1
        if now - listed.modified < grace:
            continue
        page.append((listed.key, listed.size))
        if len(page) >= _PAGE:
            settle()
    if page:
        settle()
    aborted = 0 if dry_run else store.abort_stale_writes(now - grace)
    return SweepReport(examined, removed, removed_bytes, aborted)


class Sweeper(Periodic):
    """Runs :func:`sweep_orphans` every ``interval`` seconds in a daemon thread.

    Args:
        engine: the database.
        store: the object store.
        interval: seconds between sweeps.
        grace: see :func:`sweep_orphans`.
        first: seconds before the first sweep (:data:`FIRST_SWEEP`, or ``interval`` when
            that is shorter).
    """

    def __init__(
        self,
        engine: Engine,
        store: ObjectStore,
        *,
        interval: float,
        grace: float,
        first: float | None = None,
    ) -> None:
        first = min(interval, FIRST_SWEEP) if first is None else first
        super().__init__("conveyor-sweeper", interval, self._sweep, first=first)
        self.engine = engine
        self.store = store
        self.grace = grace

    def _sweep(self) -> None:
        report = sweep_orphans(self.engine, self.store, grace=self.grace, now=time.time())
        if report.removed or report.aborted:
            log.info(
                "object sweep removed %d objects without a journal row (%s) and "
                "aborted %d unfinished writes",
                len(report.removed),
                human_size(report.removed_bytes),
                report.aborted,
            )
