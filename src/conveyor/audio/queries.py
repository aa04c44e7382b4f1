"""The audio domain's statements: records, texts, recognition attempts (SQLAlchemy Core)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import Connection, RowMapping, delete, func, insert, select, update

from conveyor.db.tables import (
    audio_records,
    files,
    owner_vocabulary,
    recognition_attempts,
    record_events,
    record_topics,
    texts,
    topics,
)

__all__ = [
    "attempt_runs",
    "attempts_by_operation",
    "attempts_of",
    "bodies_of_kind",
    "count_attempts",
    "delete_text",
    "events_of",
    "finish_attempt",
    "insert_attempt",
    "insert_record",
    "insert_topic",
    "latest_attempt",
    "list_records",
    "owner_topics",
    "owner_vocabulary_of",
    "record_by_id",
    "record_topic_names",
    "record_with_content",
    "replace_record_topics",
    "set_owner_vocabulary",
    "texts_of",
    "topic_id",
    "update_owner_fields",
    "upsert_text",
]


def _index(conn: Connection, record_id: int, kind: str | None = None) -> None:
    """Rewrite the record's search rows (:func:`conveyor.audio.search.queries.index_record`),
    after a change of its ``kind`` text when one is given and search reads that kind.

    Search is imported here, not at the top: a command that only reads records
    (``conveyor records list``) does not load it.
    """
    from conveyor.audio.search.queries import SEARCHED_KINDS, index_record

    if kind is None or kind in SEARCHED_KINDS:
        index_record(conn, record_id)


def insert_record(conn: Connection, **values: Any) -> int:
    """Insert an ``audio_records`` row; returns its id."""
    result = conn.execute(insert(audio_records).values(**values))
    assert result.inserted_primary_key is not None
    record_id = int(result.inserted_primary_key[0])
    if values.get("title") or values.get("brief"):
        _index(conn, record_id)
    return record_id


def record_by_id(conn: Connection, record_id: int, owner: str | None = None) -> RowMapping | None:
    """One record (of ``owner`` when given)."""
    query = select(audio_records).where(audio_records.c.id == record_id)
    if owner is not None:
        query = query.where(audio_records.c.owner == owner)
    return conn.execute(query).mappings().first()


def list_records(
    conn: Connection,
    *,
    owner: str | None = None,
    stage: str | None = None,
    halted: bool | None = None,
    after_id: int | None = None,
    limit: int = 50,
) -> Sequence[RowMapping]:
    """Records newest first, filtered; ``after_id`` continues a page (ids below it)."""
    query = select(audio_records).order_by(audio_records.c.id.desc()).limit(limit)
    if owner is not None:
        query = query.where(audio_records.c.owner == owner)
    if stage is not None:
        query = query.where(audio_records.c.stage == stage)
    if halted is not None:
        column = audio_records.c.halted_at
        query = query.where(column.is_not(None) if halted else column.is_(None))
    if after_id is not None:
        query = query.where(audio_records.c.id < after_id)
    return conn.execute(query).mappings().all()


def update_owner_fields(
    conn: Connection, record_id: int, owner: str, values: dict[str, Any]
) -> bool:
    """Write owner-edited fields (title, brief); never touches queue columns (P7)."""
    allowed = {k: v for k, v in values.items() if k in ("title", "brief")}
    if not allowed:
        return record_by_id(conn, record_id, owner) is not None
    result = conn.execute(
        update(audio_records)
        .where(audio_records.c.id == record_id, audio_records.c.owner == owner)
        .values(**allowed)
    )
    if result.rowcount == 1:
        _index(conn, record_id)
    return result.rowcount == 1


def texts_of(conn: Connection, record_id: int) -> Sequence[RowMapping]:
    """Every ``texts`` row of a record."""
    return (
        conn.execute(select(texts).where(texts.c.record_id == record_id).order_by(texts.c.id))
        .mappings()
        .all()
    )


def bodies_of_kind(conn: Connection, record_ids: Sequence[int], kind: str) -> dict[int, str]:
    """The body of each record's ``texts`` row of ``kind`` (one statement), by record id."""
    if not record_ids:
        return {}
    rows = conn.execute(
        select(texts.c.record_id, texts.c.body).where(
            texts.c.record_id.in_(list(record_ids)), texts.c.kind == kind
        )
    )
    return {int(record_id): str(body) for record_id, body in rows}


def upsert_text(
    conn: Connection,
    *,
    record_id: int,
    kind: str,
    body: str,
    segments: list[dict[str, Any]] | None,
    language: str | None,
    now: float,
) -> None:
    """Write the record's text of ``kind``, replacing an earlier one (a re-run never doubles)."""
    conn.execute(delete(texts).where(texts.c.record_id == record_id, texts.c.kind == kind))
    conn.execute(
        insert(texts).values(
            record_id=record_id,
            kind=kind,
            body=body,
            segments=segments,
            language=language,
            created_at=now,
        )
    )
    _index(conn, record_id, kind)


def insert_attempt(conn: Connection, **values: Any) -> int:
    """Write a recognition attempt row (before the provider is called, D12)."""
    result = conn.execute(insert(recognition_attempts).values(**values))
    assert result.inserted_primary_key is not None
    return int(result.inserted_primary_key[0])


def latest_attempt(conn: Connection, record_id: int) -> RowMapping | None:
    """The newest recognition attempt of a record."""
    return (
        conn.execute(
            select(recognition_attempts)
            .where(recognition_attempts.c.record_id == record_id)
            .order_by(recognition_attempts.c.id.desc())
            .limit(1)
        )
        .mappings()
        .first()
    )


def attempts_of(conn: Connection, record_id: int) -> Sequence[RowMapping]:
    """Every recognition attempt of a record, oldest first."""
    return (
        conn.execute(
            select(recognition_attempts)
            .where(recognition_attempts.c.record_id == record_id)
            .order_by(recognition_attempts.c.id)
        )
        .mappings()
        .all()
    )


def count_attempts(conn: Connection, record_id: int, state: str, since: float) -> int:
    """How many recognition attempts of a record ended in ``state`` at or after ``since``
    (epoch s)."""
    return int(
        conn.execute(
            select(func.count())
            .select_from(recognition_attempts)
            .where(
                recognition_attempts.c.record_id == record_id,
                recognition_attempts.c.state == state,
                recognition_attempts.c.finished_at >= since,
            )
        ).scalar_one()
    )


def attempt_runs(
    conn: Connection, records: Sequence[RowMapping]
) -> dict[int, tuple[RowMapping, int]]:
    """The newest recognition attempt of each of ``records`` (``audio_records`` rows), and how
    many of its attempts were refused or failed since the record entered its stage.

    Two queries for any number of records (a page of the list costs no more than one card).

    Returns:
        ``{record id: (newest attempt row, refused or failed count)}``; records without an
        attempt are left out.
    """
    ids = [int(r["id"]) for r in records]
    if not ids:
        return {}
    newest = (
        select(func.max(recognition_attempts.c.id))
        .where(recognition_attempts.c.record_id.in_(ids))
        .group_by(recognition_attempts.c.record_id)
    )
    latest = (
        conn.execute(select(recognition_attempts).where(recognition_attempts.c.id.in_(newest)))
        .mappings()
        .all()
    )
    counts = conn.execute(
        select(recognition_attempts.c.record_id, func.count())
        .join(audio_records, audio_records.c.id == recognition_attempts.c.record_id)
        .where(
            recognition_attempts.c.record_id.in_(ids),
            recognition_attempts.c.state.in_(("refused", "failed")),
            recognition_attempts.c.finished_at >= audio_records.c.state_entered_at,
        )
        .group_by(recognition_attempts.c.record_id)
    ).all()
    tries = {int(record_id): int(n) for record_id, n in counts}
    return {int(a["record_id"]): (a, tries.get(int(a["record_id"]), 0)) for a in latest}


def finish_attempt(conn: Connection, attempt_id: int, **values: Any) -> None:
    """Mark an attempt done or failed (state, error, raw response file, finished time)."""
    conn.execute(
        update(recognition_attempts).where(recognition_attempts.c.id == attempt_id).values(**values)
    )


def events_of(conn: Connection, record_id: int) -> Sequence[RowMapping]:
    """The record's ``record_events`` history, oldest first (D14)."""
    return (
        conn.execute(
            select(record_events)
            .where(record_events.c.domain == "audio", record_events.c.record_id == record_id)
            .order_by(record_events.c.id)
        )
        .mappings()
        .all()
    )


def lock_record(conn: Connection, record_id: int, owner: str | None = None) -> RowMapping | None:
    """Read one record and lock its row until the transaction ends (a deletion's first step).

    On PostgreSQL a step's conditional save waits for the lock and then finds no row; claims
    skip the row (SKIP LOCKED). SQLite's writers are serialised by ``BEGIN IMMEDIATE``.
    """
    query = select(audio_records).where(audio_records.c.id == record_id).with_for_update()
    if owner is not None:
        query = query.where(audio_records.c.owner == owner)
    return conn.execute(query).mappings().first()


def file_ids_of_record(conn: Connection, record: RowMapping) -> set[int]:
    """Every journal row a record points at: original, normalized audio, raw responses."""
    ids = {int(record["original_file_id"])}
    if record["normalized_file_id"] is not None:
        ids.add(int(record["normalized_file_id"]))
    raw = conn.execute(
        select(recognition_attempts.c.raw_response_file_id).where(
            recognition_attempts.c.record_id == record["id"],
            recognition_attempts.c.raw_response_file_id.is_not(None),
        )
    ).scalars()
    ids.update(int(i) for i in raw)
    return ids


def delete_record(conn: Connection, record_id: int) -> None:
    """Remove a record row; its texts, attempts, topics and idempotency keys go with it."""
    conn.execute(delete(audio_records).where(audio_records.c.id == record_id))


def owner_topics(conn: Connection, owner: str) -> Sequence[RowMapping]:
    """``owner``'s topic dictionary (D9), by name."""
    query = select(topics.c.id, topics.c.name).where(topics.c.owner == owner)
    return conn.execute(query.order_by(topics.c.name)).mappings().all()


def topic_id(conn: Connection, owner: str, name: str) -> int | None:
    """The id of ``owner``'s topic ``name``."""
    query = select(topics.c.id).where(topics.c.owner == owner, topics.c.name == name)
    row = conn.execute(query).first()
    return None if row is None else int(row[0])


def insert_topic(conn: Connection, owner: str, name: str) -> int:
    """Add ``name`` to ``owner``'s dictionary; returns its id."""
    result = conn.execute(insert(topics).values(owner=owner, name=name))
    assert result.inserted_primary_key is not None
    return int(result.inserted_primary_key[0])


def record_topic_names(conn: Connection, record_id: int) -> list[str]:
    """The record's topics in their order."""
    query = (
        select(topics.c.name)
        .join(record_topics, record_topics.c.topic_id == topics.c.id)
        .where(record_topics.c.record_id == record_id)
        .order_by(record_topics.c.position)
    )
    return [str(r[0]) for r in conn.execute(query)]


def replace_record_topics(conn: Connection, record_id: int, topic_ids: Sequence[int]) -> None:
    """Set the record's topics to ``topic_ids`` in that order (at most five, D9)."""
    conn.execute(delete(record_topics).where(record_topics.c.record_id == record_id))
    for position, tid in enumerate(topic_ids):
        conn.execute(
            insert(record_topics).values(record_id=record_id, position=position, topic_id=tid)
        )


def delete_text(conn: Connection, record_id: int, kind: str) -> bool:
    """Remove the record's text of ``kind``; True when there was one."""
    result = conn.execute(delete(texts).where(texts.c.record_id == record_id, texts.c.kind == kind))
    if result.rowcount > 0:
        _index(conn, record_id, kind)
    return result.rowcount > 0


def owner_vocabulary_of(conn: Connection, owner: str) -> RowMapping | None:
    """The owner's standing vocabulary row (``hints``, ``updated_at``), or None."""
    return (
        conn.execute(select(owner_vocabulary).where(owner_vocabulary.c.owner == owner))
        .mappings()
        .first()
    )


def set_owner_vocabulary(conn: Connection, owner: str, hints: str | None, now: float) -> None:
    """Replace the owner's vocabulary; ``None`` removes it."""
    conn.execute(delete(owner_vocabulary).where(owner_vocabulary.c.owner == owner))
    if hints is not None:
        conn.execute(insert(owner_vocabulary).values(owner=owner, hints=hints, updated_at=now))


def attempts_by_operation(conn: Connection, operation_ids: Sequence[str]) -> dict[str, RowMapping]:
    """Operation id → its attempt (``id``, ``state``, ``record_id``) with its record's ``stage``
    and ``halted_at`` and the record's newest attempt id (``latest_id``); ids without an attempt
    row (the record was deleted) are absent."""
    if not operation_ids:
        return {}
    newer = recognition_attempts.alias("newer")
    latest = (
        select(func.max(newer.c.id))
        .where(newer.c.record_id == audio_records.c.id)
        .correlate(audio_records)
        .scalar_subquery()
    )
    rows = conn.execute(
        select(
            recognition_attempts.c.id,
            recognition_attempts.c.operation_id,
            recognition_attempts.c.state,
            recognition_attempts.c.record_id,
            audio_records.c.stage,
            audio_records.c.halted_at,
            latest.label("latest_id"),
        )
        .join(audio_records, audio_records.c.id == recognition_attempts.c.record_id)
        .where(recognition_attempts.c.operation_id.in_(list(operation_ids)))
    ).mappings()
    return {str(row["operation_id"]): row for row in rows}


def record_with_content(conn: Connection, owner: str, sha256: str) -> int | None:
    """The id of ``owner``'s oldest record whose original upload has these bytes (its SHA-256,
    hex), or None: how intake from the shell keeps each file once per owner."""
    row = conn.execute(
        select(audio_records.c.id)
        .join(files, files.c.id == audio_records.c.original_file_id)
        .where(audio_records.c.owner == owner, files.c.sha256 == sha256)
        .order_by(audio_records.c.id)
        .limit(1)
    ).first()
    return None if row is None else int(row[0])
