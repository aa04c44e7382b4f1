"""A consistent copy of the embedded default (SQLite + its objects) taken while workers run, and
its restore: ``conveyor backup DIR`` and ``conveyor restore DIR``.

Consistency: the database is copied first with SQLite's online backup (a snapshot of one
moment, safe while other processes write), then exactly the objects that snapshot's journal
names are copied. Objects are written before the rows that name them, so every object the
snapshot names already exists when the copy starts. An object can still vanish before it is
copied — its record was deleted after the snapshot — and then a fresh snapshot is taken (which
no longer names it) and the objects it names are copied again (those already copied are kept:
keys are never reused). After at most :data:`ROUNDS` rounds the backup is a database and
exactly its objects; objects no row names (orphans, uploads still arriving) are left out.

A backup folder holds ``conveyor.db``, ``objects/<key>`` and ``manifest.json`` (the version,
the schema revision, when, and each object's key and size). They are written into a hidden
folder inside it (``.backup-<hex>.partial``) and moved into place at the end, the manifest last:
a backup that fails (a full disk) or is stopped leaves nothing half-made, and the hidden folder
of one that was killed is removed by the next backup into the same folder. (Inside, not beside:
the folder may be the mount point of the disk the backup is meant for.)

The restore copies the database into place with the same online backup and puts every object
into the configured store (a folder or a bucket), checking each size against the manifest.
"""

from __future__ import annotations

import errno
import json
import os
import re
import shutil
import sqlite3
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from sqlalchemy import Engine

from conveyor.db.engine import make_engine
from conveyor.objects.queries import journal_sizes
from conveyor.objects.store import ObjectStore

__all__ = [
    "MANIFEST",
    "ROUNDS",
    "BackupFolderFull",
    "BackupReport",
    "RestoreReport",
    "backup",
    "restore",
]

#: Snapshots tried before a backup gives up on a journal that changes faster than it copies.
ROUNDS = 5
#: The backup folder's description of itself.
MANIFEST = "manifest.json"


#: The hidden folder a backup is written into before it is moved into place.
_PARTIAL = re.compile(r"\.backup-[0-9a-f]{32}\.partial")
#: errno values of a write that found no room (a full disk or quota; a file too large).
_NO_ROOM = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EFBIG})


class BackupFolderFull(OSError):
    """The backup folder's disk has no room for the backup (``ENOSPC``, ``EDQUOT``, SQLite's
    "database or disk is full"), or cannot take a file this large (``EFBIG``); nothing of the
    backup was left there. ``str()`` names the folder."""

    def __init__(self, code: int, folder: Path) -> None:
        super().__init__(code, os.strerror(code))
        self.folder = folder

    def __str__(self) -> str:
        said = "cannot take a file this large" if self.errno == errno.EFBIG else "is full"
        return f"the backup folder {self.folder} {said} ({self.strerror})"


@dataclass(frozen=True)
class BackupReport:
    """A finished backup: objects and bytes in it, snapshots taken, seconds it took."""

    objects: int
    bytes: int
    rounds: int
    seconds: float


@dataclass(frozen=True)
class RestoreReport:
    """A finished restore: objects put into the store and their bytes."""

    objects: int
    bytes: int


def _sqlite_path(engine: Engine) -> Path:
    url = engine.url
    if url.get_backend_name() != "sqlite" or not url.database or url.database == ":memory:":
        raise ValueError(
            "conveyor backup copies the embedded SQLite database; for PostgreSQL use pg_dump "
            "and copy the bucket as docs/operations.md says"
        )
    return Path(url.database)


def _snapshot(source: Path, target: Path) -> None:
    """SQLite's online backup of ``source`` into ``target`` (replaced)."""
    target.unlink(missing_ok=True)
    with sqlite3.connect(source, timeout=30) as src, sqlite3.connect(target) as dst:
        src.backup(dst)
    # sqlite3's context manager commits but does not close.
    src.close()
    dst.close()


def _journal(database: Path) -> dict[str, int]:
    engine = make_engine(f"sqlite:///{database}")
    try:
        with engine.connect() as conn:
            return dict(journal_sizes(conn))
    finally:
        engine.dispose()


def _copy_object(store: ObjectStore, key: str, target: Path) -> bool:
    """Copy one object; False when it is gone."""
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(target.name + ".part")
    try:
        with store.open(key) as source, partial.open("wb") as sink:
            while chunk := source.read(1024 * 1024):
                sink.write(chunk)
    except FileNotFoundError:
        partial.unlink(missing_ok=True)
        return False
    partial.replace(target)
    return True


def backup(
    engine: Engine,
    store: ObjectStore,
    folder: Path,
    *,
    version: str,
    revision: str | None,
    progress: Callable[[int, int], None] | None = None,
) -> BackupReport:
    """Copy the SQLite database of ``engine`` and the objects its journal names to ``folder``.

    Args:
        engine: the embedded database (SQLite).
        store: the object store.
        folder: an empty or missing folder.
        version, revision: written to the manifest.
        progress: called with ``(objects copied, objects to copy)`` as the copy goes.

    Whatever happens, ``folder`` ends as it was (missing, or empty) or holds the whole backup.

    Raises:
        ValueError: not SQLite, or ``folder`` is not empty.
        RuntimeError: the journal kept naming objects that vanished for :data:`ROUNDS` rounds.
        BackupFolderFull: no room in ``folder`` for the backup.
    """
    source = _sqlite_path(engine)
    made = not folder.exists()
    if not made:
        # A killed backup's hidden folder is not in the way: no manifest, so no backup.
        for leftover in [p for p in folder.iterdir() if _PARTIAL.fullmatch(p.name)]:
            shutil.rmtree(leftover, ignore_errors=True)
        if any(folder.iterdir()):
            raise ValueError(f"{folder} is not empty; back up into a new folder")
    started = time.monotonic()
    work = folder / f".backup-{uuid.uuid4().hex}.partial"
    try:
        try:
            work.mkdir(parents=True)
            rounds, sizes = _take(source, store, work, version, revision, progress)
            # The manifest last: a folder with one is a whole backup.
            for name in ("conveyor.db", "objects", MANIFEST):
                (work / name).replace(folder / name)
            work.rmdir()
        except sqlite3.OperationalError as exc:
            if exc.sqlite_errorcode != sqlite3.SQLITE_FULL:
                raise
            raise BackupFolderFull(errno.ENOSPC, folder) from exc
        except OSError as exc:
            # The store and the database are only read here: no room is the backup folder's.
            if exc.errno not in _NO_ROOM:
                raise
            raise BackupFolderFull(exc.errno or errno.ENOSPC, folder) from exc
    except BaseException:
        shutil.rmtree(work, ignore_errors=True)
        for name in ("conveyor.db", "objects"):  # moved before the manifest could follow
            target = folder / name
            if target.is_dir():
                shutil.rmtree(target, ignore_errors=True)
            else:
                target.unlink(missing_ok=True)
        if made:
            shutil.rmtree(folder, ignore_errors=True)
        raise
    return BackupReport(len(sizes), sum(sizes.values()), rounds, time.monotonic() - started)


def _take(
    source: Path,
    store: ObjectStore,
    folder: Path,
    version: str,
    revision: str | None,
    progress: Callable[[int, int], None] | None,
) -> tuple[int, dict[str, int]]:
    """The backup of :func:`backup` written into ``folder``: its rounds and objects' sizes."""
    objects = folder / "objects"
    objects.mkdir(parents=True, exist_ok=True)
    database = folder / "conveyor.db"
    copied: set[str] = set()
    rounds = 0
    while True:
        rounds += 1
        _snapshot(source, database)
        journal = _journal(database)
        todo = [key for key in sorted(journal) if key not in copied]
        gone = []
        for done, key in enumerate(todo, 1):
            if _copy_object(store, key, objects / key):
                copied.add(key)
            else:
                gone.append(key)
            if progress is not None:
                progress(done, len(todo))
        if not gone:
            break
        if rounds == ROUNDS:
            raise RuntimeError(
                f"objects kept vanishing during the backup ({len(gone)} in the last of "
                f"{ROUNDS} rounds); try again when fewer records are being deleted"
            )
    # Objects copied in an earlier round whose rows the final snapshot no longer has (records
    # deleted meanwhile) are left out: the backup is its journal and nothing else.
    for key in copied - set(journal):
        (objects / key).unlink(missing_ok=True)
    sizes = {key: (objects / key).stat().st_size for key in journal}
    manifest = {
        "version": version,
        "schema_revision": revision,
        "taken_at": time.time(),
        "objects": [{"key": key, "size": size} for key, size in sorted(sizes.items())],
    }
    (folder / MANIFEST).write_text(json.dumps(manifest, indent=1))
    return rounds, sizes


def restore(
    folder: Path,
    engine: Engine,
    store: ObjectStore,
    *,
    progress: Callable[[int, int], None] | None = None,
) -> RestoreReport:
    """Put the backup in ``folder`` in place: its objects into ``store``, its database over the
    SQLite file of ``engine`` (no process may be running on it).

    Raises:
        ValueError: ``folder`` is not a backup (no manifest or database), or ``engine`` is not
            SQLite, or an object's size differs from the manifest.
    """
    target = _sqlite_path(engine)
    manifest_file, database = folder / MANIFEST, folder / "conveyor.db"
    if not manifest_file.is_file() or not database.is_file():
        raise ValueError(f"{folder} is not a conveyor backup (no {MANIFEST} or conveyor.db)")
    entries = json.loads(manifest_file.read_text())["objects"]
    total = 0
    for done, entry in enumerate(entries, 1):
        key, size = str(entry["key"]), int(entry["size"])
        stored = store.put_file(key, folder / "objects" / key, size=size)
        total += stored.size
        if progress is not None:
            progress(done, len(entries))
    engine.dispose()
    target.parent.mkdir(parents=True, exist_ok=True)
    for leftover in (
        target.with_name(target.name + "-wal"),
        target.with_name(target.name + "-shm"),
    ):
        leftover.unlink(missing_ok=True)
    partial = target.with_name(target.name + ".restoring")
    _snapshot(database, partial)
    partial.replace(target)
    return RestoreReport(len(entries), total)
