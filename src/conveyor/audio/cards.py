"""The record card: what an owner reads to learn a record's outcome (P11)."""

from __future__ import annotations

from typing import Any

from sqlalchemy import Connection, RowMapping

from conveyor.audio import queries
from conveyor.clock import iso_utc, seconds

__all__ = ["record_card", "transcript_of"]


def record_card(record: RowMapping) -> dict[str, Any]:
    """The card of one ``audio_records`` row: stage, halt flag and reason, owner fields, times.

    Returns:
        A JSON-ready dict; times are ISO 8601 UTC, ``duration`` is seconds of normalized audio.
    """
    halted = record["halted_at"] is not None
    return {
        "id": record["id"],
        "owner": record["owner"],
        "title": record["title"],
        "brief": record["brief"],
        "original_name": record["original_name"],
        "stage": record["stage"],
        "done": record["stage"] == "done",
        "halted": halted,
        "halt_reason": record["halt_reason"],
        "halt_error": record["halt_error"],
        "halted_at": iso_utc(record["halted_at"]),
        "attempts": record["attempts"],
        "language": record["language"],
        "detected_language": record["detected_language"],
        # Every language heard, in order: a recording may switch ("en,ru").
        "languages": (record["detected_language"] or "").split(",")
        if record["detected_language"]
        else [],
        "channels": record["channels"],
        "duration": seconds(record["duration"]),
        "no_speech": record["no_speech"],
        "created_at": iso_utc(record["created_at"]),
        "stage_entered_at": iso_utc(record["state_entered_at"]),
        "updated_at": iso_utc(record["updated_at"]),
    }


def transcript_of(conn: Connection, record_id: int) -> RowMapping | None:
    """The ``texts`` row of kind ``transcript`` of a record, if written yet."""
    for row in queries.texts_of(conn, record_id):
        if row["kind"] == "transcript":
            return row
    return None
