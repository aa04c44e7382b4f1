"""Texts of a record beyond the transcript: the owner's proofread correction, and topics (D1, D9).

A correction is a ``texts`` row of kind ``proofread`` beside the pipeline's ``transcript``
(D1). The pipeline writes only its own kind, so a correction is never overwritten (P7); exports
use the correction when there is one. A correction keeps the transcript's segment times and
replaces each segment's words, so SRT and WebVTT exports stay timed.

Topics: a per-owner dictionary, at most :data:`MAX_TOPICS` per record (D9); naming a topic the
owner does not have yet adds it to their dictionary.
"""

from __future__ import annotations

import difflib
from collections.abc import Sequence
from typing import Any

from sqlalchemy import Connection, Engine, RowMapping

from conveyor.audio import queries
from conveyor.clock import Clock
from conveyor.error_codes import ErrorCode
from conveyor.errors import Conflict, NotFound, RejectedInput
from conveyor.kinds import TextKind
from conveyor.limits import PROOFREAD_SEGMENT, TOPIC

__all__ = [
    "MAX_TOPICS",
    "PROOFREAD",
    "TRANSCRIPT",
    "clear_proofread",
    "export_text",
    "kept_words",
    "owner_topics",
    "record_topics",
    "save_proofread",
    "set_topics",
]

TRANSCRIPT = TextKind.TRANSCRIPT
PROOFREAD = TextKind.PROOFREAD
MAX_TOPICS = 5
_MAX_TOPIC = TOPIC.longest


def _own(conn: Connection, record_id: int, owner: str) -> RowMapping:
    row = queries.record_by_id(conn, record_id, owner)
    if row is None:
        raise NotFound(f"record {record_id} does not exist")
    return row


def _text_of(conn: Connection, record_id: int, kind: str) -> RowMapping | None:
    for row in queries.texts_of(conn, record_id):
        if row["kind"] == kind:
            return row
    return None


def export_text(conn: Connection, record_id: int) -> RowMapping | None:
    """The text to show and export: the ``proofread`` row when there is one, else the
    ``transcript`` row, else None (not transcribed yet)."""
    return _text_of(conn, record_id, PROOFREAD) or _text_of(conn, record_id, TRANSCRIPT)


def save_proofread(
    engine: Engine, clock: Clock, record_id: int, owner: str, segments: Sequence[str]
) -> dict[str, Any]:
    """Save the owner's correction: one corrected text per transcript segment, times kept.

    Returns:
        ``{"kind": "proofread", "text": str, "segments": [{"start", "end", "text", "words"}]}``;
        each segment's words are the corrected text's, with the times of the transcript's words
        it left unchanged (see :func:`kept_words`).

    Raises:
        NotFound: no such record of ``owner``.
        Conflict: ``no_text`` — the record has no transcript to correct yet.
        RejectedInput: ``invalid_request`` — not one text per segment, or a text too long.
    """
    with engine.begin() as conn:
        _own(conn, record_id, owner)
        transcript = _text_of(conn, record_id, TRANSCRIPT)
        if transcript is None:
            raise Conflict(f"record {record_id} has no transcript to correct yet")
        timed: list[dict[str, Any]] = list(transcript["segments"] or [])
        if not timed:
            timed = [{"start": 0.0, "end": 0.0, "text": str(transcript["body"])}]
        if len(segments) != len(timed):
            raise RejectedInput(
                ErrorCode.INVALID_REQUEST,
                f"the transcript has {len(timed)} segments; send one text for each",
            )
        fixed = []
        for seg, text in zip(timed, segments, strict=True):
            if PROOFREAD_SEGMENT.problem(text) is not None:
                raise RejectedInput(
                    ErrorCode.INVALID_REQUEST, "a segment's text is too long or has NUL"
                )
            corrected = " ".join(text.split())
            fixed.append(
                {
                    "start": seg["start"],
                    "end": seg["end"],
                    "text": corrected,
                    "words": kept_words(seg.get("words") or [], corrected),
                    **{k: seg[k] for k in ("channel", "language") if seg.get(k) is not None},
                }
            )
        body = " ".join(s["text"] for s in fixed if s["text"])
        queries.upsert_text(
            conn,
            record_id=record_id,
            kind=PROOFREAD,
            body=body,
            segments=fixed,
            language=transcript["language"],
            now=clock.now(),
        )
    return {"kind": PROOFREAD, "text": body, "segments": fixed}


def clear_proofread(engine: Engine, record_id: int, owner: str) -> bool:
    """Drop the owner's correction (exports use the transcript again); True when there was one.

    Raises:
        NotFound: no such record of ``owner``.
    """
    with engine.begin() as conn:
        _own(conn, record_id, owner)
        return queries.delete_text(conn, record_id, PROOFREAD)


def owner_topics(engine: Engine, owner: str) -> list[str]:
    """``owner``'s topic dictionary, by name."""
    with engine.connect() as conn:
        return [str(r["name"]) for r in queries.owner_topics(conn, owner)]


def record_topics(conn: Connection, record_id: int) -> list[str]:
    """The record's topics, in order."""
    return queries.record_topic_names(conn, record_id)


def _clean_topics(names: Sequence[str]) -> list[str]:
    cleaned: list[str] = []
    for name in names:
        text = " ".join(name.split())
        if not text:
            continue
        if len(text) > _MAX_TOPIC or not text.isprintable():
            raise RejectedInput(
                ErrorCode.INVALID_REQUEST, f"a topic is 1-{_MAX_TOPIC} printable characters"
            )
        if text.casefold() not in (c.casefold() for c in cleaned):
            cleaned.append(text)
    if len(cleaned) > MAX_TOPICS:
        raise RejectedInput(
            ErrorCode.TOO_MANY_TOPICS, f"a record has at most {MAX_TOPICS} topics (D9)"
        )
    return cleaned


def set_topics(engine: Engine, record_id: int, owner: str, names: Sequence[str]) -> list[str]:
    """Set the record's topics (D9): at most five, from ``owner``'s dictionary or new to it.

    Names are trimmed; blanks dropped; a repeat (ignoring case) counts once. An empty list
    clears the record's topics (the dictionary keeps them).

    Returns:
        The record's topics now, in order.

    Raises:
        NotFound: no such record of ``owner``.
        RejectedInput: ``too_many_topics`` (more than five) or ``invalid_request``.
    """
    cleaned = _clean_topics(names)
    with engine.begin() as conn:
        _own(conn, record_id, owner)
        known = {str(r["name"]).casefold(): int(r["id"]) for r in queries.owner_topics(conn, owner)}
        ids = []
        for name in cleaned:
            tid = known.get(name.casefold())
            if tid is None:
                tid = queries.insert_topic(conn, owner, name)
                known[name.casefold()] = tid
            ids.append(tid)
        queries.replace_record_topics(conn, record_id, ids)
        return queries.record_topic_names(conn, record_id)


def kept_words(timed: Sequence[dict[str, Any]], corrected: str) -> list[dict[str, Any]]:
    """The words of ``corrected``, each with the times (and confidence) of the transcript word
    it leaves unchanged, and ``start``/``end`` null for a word the correction changed or added.

    Words are matched in order (:class:`difflib.SequenceMatcher` over the words as written);
    a segment without timed words gives no words.
    """
    if not timed:
        return []
    said = [str(w["text"]) for w in timed]
    written = corrected.split()
    words: list[dict[str, Any]] = [
        {"start": None, "end": None, "text": text, "probability": None} for text in written
    ]
    matcher = difflib.SequenceMatcher(a=said, b=written, autojunk=False)
    for block in matcher.get_matching_blocks():
        for i in range(block.size):
            words[block.b + i] = dict(timed[block.a + i])
    return words
