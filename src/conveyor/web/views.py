"""What a page shows of a record or an item: stage in words, time in stage, place in its lane's
queue (or that it is being worked on, or waits to retry)."""

from __future__ import annotations

from typing import Any

from sqlalchemy import Connection, RowMapping

from conveyor.clock import iso_utc
from conveyor.media import albums as album_views
from conveyor.media import queries as media_queries
from conveyor.pipeline import Domain
from conveyor.web import queries
from conveyor.web.words import duration_words, halt_words, stage_words

__all__ = ["item_status", "record_status"]


def _progress(conn: Connection, row: RowMapping, domain: Domain, now: float) -> dict[str, Any]:
    """Stage, halt, time in stage and place in its lane's queue of a record or item row."""
    halted = row["halted_at"] is not None
    done = row["stage"] in domain.terminal_stages
    working = (
        not halted
        and row["claim_token"] is not None
        and row["claim_expires_at"] is not None
        and float(row["claim_expires_at"]) > now
    )
    retry_at = row["retry_at"]
    retrying = not (halted or done or working) and retry_at is not None and float(retry_at) > now
    place: int | None = None
    if not (halted or done or working or retrying):
        place = queries.place_in_queue(conn, domain, row, now)
    entered = float(row["state_entered_at"])
    return {
        "stage": row["stage"],
        "stage_words": stage_words(domain.name, str(row["stage"])),
        "done": done,
        "halted": halted,
        "halt_reason": row["halt_reason"],
        "halt_words": halt_words(row["halt_reason"]) if halted else "",
        "halt_error": row["halt_error"],
        "working": working,
        "place": place,
        "retrying": retrying,
        "attempts": int(row["attempts"] or 0),
        "retry_in": duration_words(float(retry_at) - now) if retrying else "",
        "stage_entered_at": iso_utc(entered),
        "time_in_stage": duration_words(now - entered),
    }


def record_status(conn: Connection, domain: Domain, row: RowMapping, now: float) -> dict[str, Any]:
    """A record as the pages show it: its card fields plus progress in plain words."""
    return {
        "id": row["id"],
        "title": row["title"],
        "brief": row["brief"],
        "name": row["title"] or row["original_name"] or f"Recording {row['id']}",
        "original_name": row["original_name"],
        "created_at": iso_utc(row["created_at"]),
        "duration": duration_words(row["duration"]) if row["duration"] else "",
        "no_speech": bool(row["no_speech"]),
        "language": row["detected_language"] or row["language"],
        **_progress(conn, row, domain, now),
    }


def item_status(
    conn: Connection, domain: Domain, item_id: int, owner: str, now: float
) -> dict[str, Any]:
    """An item as the pages show it: its roles (M2), kind, and progress in plain words.

    Raises:
        NotFound: no such item of ``owner``.
    """
    view = album_views.item_view(conn, item_id, owner=owner)
    row = media_queries.item_by_id(conn, item_id, owner)
    assert row is not None
    roles = {role: f"/files/{obj['key']}" for role, obj in view["roles"].items()}
    return {
        **view,
        "urls": roles,
        "name": view["original_name"] or f"Item {item_id}",
        **_progress(conn, row, domain, now),
    }
