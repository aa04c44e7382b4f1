"""The record card: what an owner reads to learn a record's outcome (P11)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from sqlalchemy import Connection, RowMapping

from conveyor.audio import queries
from conveyor.audio.stages import AUDIO
from conveyor.clock import iso_utc, seconds
from conveyor.pipeline.status import RecordState, status_of

__all__ = [
    "WAITING_STAGES",
    "described_card",
    "hints_of",
    "provider_wait",
    "provider_waits",
    "record_card",
    "transcript_of",
]

#: The stages where a record waits on its recognition provider: submitting, then collecting.
WAITING_STAGES = frozenset({"normalized", "submitted"})


def provider_waits(conn: Connection, records: Sequence[RowMapping]) -> dict[int, dict[str, Any]]:
    """Why each of ``records`` waits on its provider, for those that do (D6 made visible).

    A record waits on its provider while it is not halted, at ``normalized`` or ``submitted``,
    and the newest of its recognition attempts was refused (the provider was busy or
    unreachable; nothing started) or failed in this stage. Postponing writes no journal row
    per try, so the attempts and the record's ``retry_at`` are where this is read from.

    Returns:
        ``{record id: {"provider", "error", "tries", "next_try_at"}}``: ``error`` is what the
        provider said on the newest try (redacted as stored), ``tries`` the refused or failed
        tries since the record entered its stage, ``next_try_at`` ISO 8601 UTC (a past time: due now
        or being tried). Records that do not wait on their provider are left out.
    """
    candidates = {
        int(r["id"]): r for r in records if r["halted_at"] is None and r["stage"] in WAITING_STAGES
    }
    waits: dict[int, dict[str, Any]] = {}
    runs = queries.attempt_runs(conn, list(candidates.values()))
    for record_id, (attempt, tries) in runs.items():
        record = candidates[record_id]
        finished = attempt["finished_at"]
        if (
            attempt["state"] not in ("refused", "failed")
            or finished is None
            or float(finished) < float(record["state_entered_at"])
        ):
            continue  # a try in flight, accepted, or from before the record entered its stage
        waits[record_id] = {
            "provider": attempt["provider"],
            "error": attempt["error"],
            "tries": max(tries, 1),
            "next_try_at": iso_utc(record["retry_at"]),
        }
    return waits


def provider_wait(conn: Connection, record: RowMapping) -> dict[str, Any] | None:
    """:func:`provider_waits` of one record: why it waits on its provider, or ``None``."""
    return provider_waits(conn, [record]).get(int(record["id"]))


def record_card(
    record: RowMapping, wait: Mapping[str, Any] | None = None, *, now: float
) -> dict[str, Any]:
    """The card of one ``audio_records`` row: stage, halt flag and reason, owner fields, times.

    Args:
        wait: what :func:`provider_wait` read for the record; the card's ``provider_wait``.
        now: the time it is read at (epoch seconds), for its status.

    Returns:
        A JSON-ready dict; times are ISO 8601 UTC, ``duration`` is seconds of normalized audio.
        ``done`` and ``halted`` are its :func:`~conveyor.pipeline.status.status_of`, as the
        pages and the CLI read it: ``done`` once it reached a terminal stage (also when halted
        there), ``halted`` while it is halted.
    """
    status = status_of(record, AUDIO, now)
    return {
        "id": record["id"],
        "owner": record["owner"],
        "title": record["title"],
        "brief": record["brief"],
        "original_name": record["original_name"],
        "stage": record["stage"],
        "done": status.terminal,
        "halted": status.state is RecordState.HALTED,
        "halt_reason": record["halt_reason"],
        "halt_error": record["halt_error"],
        "halted_at": iso_utc(record["halted_at"]),
        "attempts": record["attempts"],
        # Why a record that is not halted is still waiting on its provider (D6), if it is.
        "provider_wait": dict(wait) if wait is not None else None,
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


def described_card(conn: Connection, record: RowMapping, *, now: float) -> dict[str, Any]:
    """:func:`record_card` with what a person reading it also wants: ``provider_wait`` (why it
    waits on its provider, or None) and ``hints`` (the record's own vocabulary hints, or None),
    as ``conveyor records show`` and ``conveyor records add`` print it."""
    card = record_card(record, provider_wait(conn, record), now=now)
    card["hints"] = hints_of(conn, int(record["id"]))
    return card


def hints_of(conn: Connection, record_id: int) -> str | None:
    """The record's own vocabulary hints (its ``texts`` row of kind ``hints``), or None."""
    for row in queries.texts_of(conn, record_id):
        if row["kind"] == "hints":
            return str(row["body"])
    return None
