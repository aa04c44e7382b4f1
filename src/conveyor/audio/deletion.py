"""Deleting a recording: its row, every row that hangs off it, and every object it has.

Safe against a step in flight: the deletion locks the record's row and removes it in one
transaction. A step still holding a claim on it then finds no row for its conditional save
(P6): it writes nothing — no transcript, no attempt, no journal row — and the objects it stored
meanwhile are removed by the engine as leftovers (:attr:`conveyor.pipeline.Domain.discard`).
After the commit the record's objects are removed from the store: the original, the
normalized audio and the raw provider responses (D2), plus the record's whole folder, in case
a step was writing there. A crash between commit and removal leaves objects without rows,
which the periodic sweep removes (:mod:`conveyor.objects.sweep`).

Idempotent: deleting a record that does not exist (any more) does nothing and says so.
"""

from __future__ import annotations

import logging

from sqlalchemy import Engine

from conveyor.audio import queries
from conveyor.audio.stages import AUDIO_KEYS
from conveyor.clock import Clock, iso_utc
from conveyor.objects import ObjectStore, delete_file_rows
from conveyor.pipeline import queries as pipeline_queries

__all__ = ["delete_record"]

log = logging.getLogger("conveyor.audio")


def delete_record(
    engine: Engine, store: ObjectStore, clock: Clock, record_id: int, *, owner: str | None = None
) -> bool:
    """Delete the recording ``record_id`` (of ``owner`` when given) with all it has.

    The record's journal rows go with it (D14); the operator's log keeps a line. Its id is not
    given to another record afterwards (revision 0015 on SQLite; PostgreSQL's sequences).

    Returns:
        True when the record existed and is gone now; False when there was none.
    """
    with engine.begin() as conn:
        record = queries.lock_record(conn, record_id, owner)
        if record is None:
            return False
        file_ids = queries.file_ids_of_record(conn, record)
        queries.delete_record(conn, record_id)
        keys = delete_file_rows(conn, file_ids)
        pipeline_queries.delete_events(conn, domain="audio", record_id=record_id)
    for key in keys:
        store.delete(key)
    store.delete_prefix(AUDIO_KEYS.record(record_id))
    log.info("record %s deleted at %s (%d objects)", record_id, iso_utc(clock.now()), len(keys))
    return True
