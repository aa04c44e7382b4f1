"""The journal against the store: every ``files`` row names an object of its size, every stored
object has a row (M1). ``conveyor storage check`` runs :func:`check_storage`.

Three kinds of disagreement, each with its own bit in the command's exit code:

* **missing**: a row whose object is not in the store (lost from a bucket, restored from an
  older backup than the database): the record or item it belongs to cannot be read or worked;
* **size mismatch**: a row whose object has another size (a partial copy, a replaced object);
* **orphan**: an object under the journalled prefixes with no row, older than the sweep's grace
  (younger ones may be uploads arriving or steps running; they are counted as ``recent``). The
  periodic sweep, or ``conveyor storage sweep``, removes orphans; nothing else needs doing.

The store is listed first and the journal read after: an upload that lands in between is a
young object (not an orphan), and a row or object deleted in between is looked up once more
before it is reported, so a check taken while workers run reports only lasting differences.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

from sqlalchemy import Engine

from conveyor.objects.keys import OBJECT_PREFIXES
from conveyor.objects.queries import journal_sizes, journaled_keys
from conveyor.objects.store import ListedObject, ObjectStore

__all__ = ["Mismatch", "StorageReport", "check_storage"]


@dataclass(frozen=True)
class Mismatch:
    """A journal row whose object has another size (bytes)."""

    key: str
    journal_size: int
    stored_size: int


@dataclass
class StorageReport:
    """What :func:`check_storage` found.

    Attributes:
        journaled: journal rows read.
        stored: objects listed under the journalled prefixes.
        missing: keys of rows without an object, sorted.
        mismatched: rows whose object has another size, by key.
        orphans: keys of objects without a row older than the grace, sorted.
        orphan_bytes: their total size.
        recent: objects without a row younger than the grace (not orphans yet).
    """

    journaled: int = 0
    stored: int = 0
    missing: list[str] = field(default_factory=list)
    mismatched: list[Mismatch] = field(default_factory=list)
    orphans: list[str] = field(default_factory=list)
    orphan_bytes: int = 0
    recent: int = 0

    @property
    def agrees(self) -> bool:
        """True when the journal and the store agree (recent objects aside)."""
        return not (self.missing or self.mismatched or self.orphans)


def _listing(store: ObjectStore) -> Iterator[ListedObject]:
    for prefix in OBJECT_PREFIXES:
        yield from store.list(prefix)


def check_storage(engine: Engine, store: ObjectStore, *, grace: float, now: float) -> StorageReport:
    """Compare the journal with the store.

    Args:
        engine: the database.
        store: the object store.
        grace: seconds an object may exist without a row (``[storage] sweep_grace``).
        now: the current time, epoch seconds (compared with objects' modification times).

    Returns:
        The report; nothing is changed.

    Raises:
        OSError: the store cannot be listed (:class:`~conveyor.objects.StorageUnavailable` in
            an outage).
    """
    report = StorageReport()
    listed = {obj.key: obj for obj in _listing(store)}
    report.stored = len(listed)
    missing: list[str] = []
    mismatched: list[str] = []
    with engine.connect() as conn:
        for key, size in journal_sizes(conn):
            report.journaled += 1
            obj = listed.pop(key, None)
            if obj is None:
                missing.append(key)
            elif obj.size != size:
                mismatched.append(key)
        # What is left was listed without a row; rows written since the listing began are
        # looked up again before any is called an orphan.
        unrowed = [obj for obj in listed.values() if now - obj.modified >= grace]
        report.recent = len(listed) - len(unrowed)
        rowed = journaled_keys(conn, [obj.key for obj in unrowed])
        for obj in unrowed:
            if obj.key not in rowed:
                report.orphans.append(obj.key)
                report.orphan_bytes += obj.size
        # A row and its object deleted while we read (a record deleted) is no difference:
        # only rows still there, whose object the store still lacks, are reported.
        again = dict(journal_sizes(conn, missing + mismatched))
    for key in missing:
        if key in again and store.stat(key) is None:
            report.missing.append(key)
    for key in mismatched:
        stat = store.stat(key) if key in again else None
        if stat is not None and stat.size != again[key]:
            report.mismatched.append(Mismatch(key, again[key], stat.size))
        elif stat is None and key in again:
            report.missing.append(key)
    report.missing.sort()
    report.orphans.sort()
    return report
