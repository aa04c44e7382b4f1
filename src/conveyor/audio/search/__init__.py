"""Full-text search over an owner's recordings: titles, briefs, transcripts, corrections.

:func:`search_records` answers the best recordings first (SQLite: FTS5's BM25; PostgreSQL:
``ts_rank`` over the language's dictionary, see :mod:`.dictionaries`), each with a snippet
whose matched words are marked and, for a hit in a transcript or correction, the second of
the recording where the matched line starts (the page's player starts there). The index is
written in the same transaction as the texts (:func:`.queries.index_record`), so a saved
correction is found at once. The web page, ``GET /api/records?q=`` and ``conveyor records
search`` all call this.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from sqlalchemy import Engine

from conveyor.audio.search import queries
from conveyor.audio.search.queries import MARK_END, MARK_START
from conveyor.error_codes import ErrorCode
from conveyor.errors import RejectedInput

__all__ = ["MAX_QUERY", "Hit", "search_records"]

MAX_QUERY = 200
"""Characters a query may have."""
_WORD = re.compile(r"\w+", re.UNICODE)
_KINDS_PER_RECORD = 4


@dataclass(frozen=True)
class Hit:
    """One recording found.

    Attributes:
        record_id: the record.
        name: its title, else its file name.
        kind: where the best match is: ``title``, ``brief``, ``transcript`` or ``proofread``.
        rank: higher is better (comparable within one answer only).
        snippet: the text around the match as ``(text, matched)`` parts, in order.
        start: seconds into the recording where the matched line starts (None for a title
            or brief, or a text without times).
        created_at: upload time (epoch s).
    """

    record_id: int
    name: str
    kind: str
    rank: float
    snippet: tuple[tuple[str, bool], ...]
    start: float | None
    created_at: float


def query_words(query: str) -> list[str]:
    """The words of ``query`` (letters and digits of any script)."""
    return _WORD.findall(query)


def _parts(snippet: str) -> tuple[tuple[str, bool], ...]:
    parts: list[tuple[str, bool]] = []
    for n, piece in enumerate(re.split(f"[{MARK_START}{MARK_END}]", snippet)):
        if piece:
            parts.append((piece, n % 2 == 1))
    return tuple(parts)


def _moment(segments: list[dict[str, object]], parts: tuple[tuple[str, bool], ...]) -> float | None:
    """Where the first matched word of the snippet is said: the first segment holding it
    within the snippet's words (the snippet's words in order narrow it to that line)."""
    marked = [p.lower() for p, hit in parts if hit]
    if not marked or not segments:
        return None
    around = "".join(p for p, _ in parts).replace("…", " ").lower().split()
    for seg in segments:
        line = str(seg.get("text", "")).lower()
        if marked[0] in line and (not around or any(w in line for w in around[:3])):
            return float(str(seg.get("start", 0.0)))
    for seg in segments:
        if marked[0] in str(seg.get("text", "")).lower():
            return float(str(seg.get("start", 0.0)))
    return None


def search_records(engine: Engine, owner: str, query: str, *, limit: int = 20) -> list[Hit]:
    """``owner``'s recordings that match ``query``, best first, at most ``limit``.

    Every word must occur (the last may be the start of a longer one on SQLite); PostgreSQL
    also reads ``"a phrase"``, ``-word`` and ``or``. An empty query finds nothing.

    Raises:
        RejectedInput: ``invalid_request`` for a query over :data:`MAX_QUERY` characters or
            with a NUL character.
    """
    if len(query) > MAX_QUERY or "\x00" in query:
        raise RejectedInput(
            ErrorCode.INVALID_REQUEST, f"a search has at most {MAX_QUERY} characters and no NUL"
        )
    words = query_words(query)
    if not words:
        return []
    with engine.connect() as conn:
        rows = queries.match(conn, owner, words, query, limit * _KINDS_PER_RECORD)
        best: dict[int, tuple[str, float, str]] = {}
        for row in rows:
            record_id = int(row["record_id"])
            if record_id not in best:
                best[record_id] = (str(row["kind"]), float(row["rank"]), str(row["snippet"]))
        chosen = list(best.items())[:limit]
        named = queries.records_named(conn, [r for r, _ in chosen])
        hits = []
        for record_id, (kind, rank, snippet) in chosen:
            record = named.get(record_id)
            if record is None:
                continue
            parts = _parts(snippet)
            segments = queries.segments_of(conn, record_id, kind)
            hits.append(
                Hit(
                    record_id=record_id,
                    name=str(
                        record["title"] or record["original_name"] or f"Recording {record_id}"
                    ),
                    kind=kind,
                    rank=rank,
                    snippet=parts,
                    start=_moment(segments, parts),
                    created_at=float(record["created_at"]),
                )
            )
    return hits
