"""Statements on the object journal ``files``: one row per physical object (M1)."""

from __future__ import annotations

import hashlib
from collections.abc import Collection, Iterator, Mapping, Sequence
from typing import Any

from sqlalchemy import Connection, RowMapping, delete, func, insert, select, update

from conveyor.db.tables import files

# Keys per IN list: well under SQLite's 32,766 bound parameters.
_BATCH = 500

__all__ = [
    "delete_file_rows",
    "file_by_id",
    "file_by_key",
    "journal_count",
    "journal_sizes",
    "journal_values",
    "journaled_keys",
    "lock_content",
    "put_file_row",
    "put_file_rows",
]


def lock_content(conn: Connection, owner: str, sha256: str) -> None:
    """Hold, until ``conn``'s transaction ends, the right to decide whether ``owner`` already
    has the bytes of SHA-256 ``sha256`` (hex): intakes of the same content by the same owner
    that both found it new before storing it then look again one after the other, so the
    second sees the first's commit and each file is kept once per owner.

    PostgreSQL: a transaction-level advisory lock on 64 bits of a hash of owner and digest (a
    collision only makes two intakes wait for each other). SQLite: nothing to take, every
    write transaction already holds the database's write lock from its ``BEGIN IMMEDIATE``.
    Call it before the statement that looks: under READ COMMITTED that statement's snapshot
    is taken after the lock is granted.
    """
    if conn.dialect.name != "postgresql":
        return
    digest = hashlib.sha256(f"{owner}\0{sha256}".encode()).digest()
    conn.execute(select(func.pg_advisory_xact_lock(int.from_bytes(digest[:8], "big", signed=True))))


def put_file_row(
    conn: Connection,
    *,
    key: str,
    mime_type: str,
    size: int,
    now: float,
    state: str = "ready",
    replaces: int | None = None,
    **facts: Any,
) -> int:
    """Insert the journal row of the object ``key``, or replace its facts if it exists.

    A step writes its objects under claim-unique keys and calls this inside its fenced save, so
    only the live claim holder's object is ever named by the journal. A re-run (a new claim)
    passes the row of the object it supersedes as ``replaces``: that row is pointed at the new
    key, keeping its id (and every reference to it), and the old object, now named by no row,
    is left to the sweep (exactly one row per physical object, M1, M4).

    Args:
        replaces: the id of the row this object supersedes (an earlier run's), if any.
        facts: optional ``format``, ``sha256``, ``width``, ``height`` (pixels), ``duration`` (s).

    Returns:
        The row id.
    """
    values = {"mime_type": mime_type, "size": size, "state": state, **facts}
    if replaces is not None:
        updated = conn.execute(
            update(files).where(files.c.id == replaces).values(key=key, created_at=now, **values)
        )
        if updated.rowcount:
            return replaces
    existing = conn.execute(select(files.c.id).where(files.c.key == key)).scalar()
    if existing is not None:
        conn.execute(update(files).where(files.c.id == existing).values(**values))
        return int(existing)
    result = conn.execute(insert(files).values(key=key, created_at=now, **values))
    assert result.inserted_primary_key is not None
    return int(result.inserted_primary_key[0])


def put_file_rows(conn: Connection, rows: Sequence[Mapping[str, Any]], now: float) -> list[int]:
    """Insert the journal rows of new objects in one statement; returns their ids in order.

    For objects under claim-unique keys written by a step's save (no earlier row names them):
    one round trip for all of a photo's variants instead of two per object. Each row has
    ``key``, ``mime_type``, ``size`` and optional facts as :func:`put_file_row` takes them;
    ``state`` defaults to ``ready``.
    """
    if not rows:
        return []
    query = insert(files).returning(files.c.id, sort_by_parameter_order=True)
    return [int(i) for i in conn.execute(query, journal_values(rows, now)).scalars()]


def journal_values(rows: Sequence[Mapping[str, Any]], now: float) -> list[dict[str, Any]]:
    """The ``files`` columns of new objects' journal rows (as :func:`put_file_rows` takes
    them), every column present, dated ``now``."""
    facts = ("format", "sha256", "width", "height", "duration")
    return [
        {
            "key": r["key"],
            "mime_type": r["mime_type"],
            "size": r["size"],
            "state": r.get("state", "ready"),
            "created_at": now,
            **{f: r.get(f) for f in facts},
        }
        for r in rows
    ]


def file_by_id(conn: Connection, file_id: int) -> RowMapping | None:
    """The journal row with id ``file_id``."""
    return conn.execute(select(files).where(files.c.id == file_id)).mappings().first()


def file_by_key(conn: Connection, key: str) -> RowMapping | None:
    """The journal row of the object ``key``."""
    return conn.execute(select(files).where(files.c.key == key)).mappings().first()


def journaled_keys(conn: Connection, keys: Collection[str]) -> set[str]:
    """Those of ``keys`` that have a journal row."""
    found: set[str] = set()
    ordered = sorted(set(keys))
    for start in range(0, len(ordered), _BATCH):
        batch = ordered[start : start + _BATCH]
        found.update(conn.execute(select(files.c.key).where(files.c.key.in_(batch))).scalars())
    return found


def journal_count(conn: Connection) -> int:
    """Rows in the object journal."""
    return int(conn.execute(select(func.count()).select_from(files)).scalar_one())


def journal_sizes(
    conn: Connection, keys: Collection[str] | None = None
) -> Iterator[tuple[str, int]]:
    """``(key, size)`` of every journal row (of ``keys`` only, when given), in key order."""
    if keys is None:
        query = select(files.c.key, files.c.size).order_by(files.c.key)
        for key, size in conn.execute(query.execution_options(yield_per=1000)):
            yield str(key), int(size)
        return
    ordered = sorted(set(keys))
    for start in range(0, len(ordered), _BATCH):
        batch = ordered[start : start + _BATCH]
        query = select(files.c.key, files.c.size).where(files.c.key.in_(batch))
        for key, size in conn.execute(query.order_by(files.c.key)):
            yield str(key), int(size)


def delete_file_rows(conn: Connection, file_ids: Collection[int]) -> list[str]:
    """Remove the journal rows ``file_ids``; returns the keys they named (to delete next)."""
    if not file_ids:
        return []
    ids = sorted(set(file_ids))
    keys = list(conn.execute(select(files.c.key).where(files.c.id.in_(ids))).scalars())
    conn.execute(delete(files).where(files.c.id.in_(ids)))
    return keys
