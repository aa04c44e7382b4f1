"""Full-text search over an owner's recordings: titles, briefs, transcripts, corrections.

:func:`search_records` answers the best recordings first (SQLite: FTS5's BM25; PostgreSQL:
``ts_rank`` over the language's dictionary, see :mod:`.dictionaries`), each with a snippet
whose matched words are marked and, for a hit in a transcript or correction, the second of
the recording where the matched line starts (the page's player starts there). The snippet is
the line of the text that says most of the query's words, cut from the hit's own text (the
databases' ``snippet()`` and ``ts_headline`` would read whole transcripts for it). The index is
written in the same transaction as the texts (:func:`.queries.index_record`), so a saved
correction is found at once. Ranking is bounded (:data:`.queries.RANKED`): a word in most
of 10,000 recordings answers as fast as a rare one (docs/performance.md). The web page,
``GET /api/records?q=`` and ``conveyor records search`` all call this.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Engine

from conveyor.audio.search import queries
from conveyor.error_codes import ErrorCode
from conveyor.errors import RejectedInput

__all__ = ["MAX_QUERY", "Hit", "search_records"]

MAX_QUERY = 200
"""Characters a query may have."""
_WORD = re.compile(r"\w+", re.UNICODE)
_TOKEN = re.compile(r"\w+|\W+", re.UNICODE)
_KINDS_PER_RECORD = 4
_SNIPPET_WORDS = 30
# Endings Porter's stemmer takes off English words, longest first.
_SUFFIXES = ("ations", "ation", "ings", "ing", "ies", "ied", "es", "ed", "ly", "s")


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

    def shown(self) -> dict[str, Any]:
        """The hit as ``GET /api/records?q=`` answers it in ``hits`` and ``conveyor records
        search --json`` prints it: ``record_id``, ``kind``, ``rank``, ``snippet`` (a list of
        ``{"text", "match"}``, in order) and ``start`` (seconds, or None)."""
        return {
            "record_id": self.record_id,
            "kind": self.kind,
            "rank": self.rank,
            "snippet": [{"text": text, "match": matched} for text, matched in self.snippet],
            "start": self.start,
        }


def query_words(query: str) -> list[str]:
    """The words of ``query`` (letters and digits of any script)."""
    return _WORD.findall(query)


def _stem(word: str) -> str:
    """A word cut to what its other forms share, enough to mark them (SQLite's Porter stemmer
    matched them; this only finds them again in the text shown)."""
    low = word.lower()
    for suffix in _SUFFIXES:
        if low.endswith(suffix) and len(low) - len(suffix) >= 3:
            return low[: -len(suffix)]
    return low


def _marked(text: str, terms: list[str]) -> tuple[tuple[str, bool], ...]:
    parts: list[tuple[str, bool]] = []
    for token in _TOKEN.findall(text):
        hit = bool(_WORD.fullmatch(token)) and token.lower().startswith(tuple(terms))
        if parts and not hit and not parts[-1][1]:
            parts[-1] = (parts[-1][0] + token, False)
        else:
            parts.append((token, hit))
    return tuple(parts)


def _excerpt(
    segments: list[dict[str, Any]], terms: list[str]
) -> tuple[tuple[tuple[str, bool], ...], float | None]:
    """The line that says most of the query's terms (the first of equals), with the next
    line when it is short, its words marked; and the second it starts (None untimed)."""
    if not segments or not terms:
        return (), None
    prefixes = tuple(terms)
    # A word starting with the term, as _marked reads it (one scan per term and line, in C;
    # a 10-minute transcript has ~125 lines).
    starts = [re.compile(r"(?<!\w)" + re.escape(t)) for t in set(terms)]
    at, most = 0, -1
    for n, seg in enumerate(segments):
        low = str(seg.get("text", "")).lower()
        count = sum(1 for pattern in starts if pattern.search(low))
        if count > most:
            at, most = n, count
            if count == len(starts):
                break  # the first line that says them all
    text = str(segments[at].get("text", "")).strip()
    if len(text.split()) < _SNIPPET_WORDS // 2 and at + 1 < len(segments):
        text += " " + str(segments[at + 1].get("text", "")).strip()
    words = text.split()
    if len(words) > _SNIPPET_WORDS:
        first = next(
            (n for n, w in enumerate(words) if w.lower().lstrip("\"'(¿¡«").startswith(prefixes)), 0
        )
        begin = max(0, min(first - _SNIPPET_WORDS // 3, len(words) - _SNIPPET_WORDS))
        text = ("… " if begin else "") + " ".join(words[begin : begin + _SNIPPET_WORDS]) + " …"
    start = segments[at].get("start")
    return _marked(text, terms), (float(start) if start is not None else None)


def search_records(engine: Engine, owner: str, query: str, *, limit: int = 20) -> list[Hit]:
    """``owner``'s recordings that match ``query``, best first, at most ``limit``.

    Every word must occur (the last, from four letters, may be the start of a longer one on
    SQLite); PostgreSQL also reads ``"a phrase"``, ``-word`` and ``or``. When more of the
    owner's texts match than :data:`.queries.RANKED`, the most recently written of them are
    ranked. An empty query finds nothing.

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
        rows, lexemes = queries.match(conn, owner, words, query, limit * _KINDS_PER_RECORD)
        terms = [t.lower() for t in lexemes] if lexemes else [_stem(w) for w in words]
        best: dict[int, tuple[str, float]] = {}
        for row in rows:
            record_id = int(row["record_id"])
            if record_id not in best:
                best[record_id] = (str(row["kind"]), float(row["rank"]))
        chosen = list(best.items())[:limit]
        named = queries.records_named(conn, [r for r, _ in chosen])
        shown = queries.shown_texts(conn, [(r, kind) for r, (kind, _) in chosen])
        hits = []
        for record_id, (kind, rank) in chosen:
            record = named.get(record_id)
            if record is None:
                continue
            parts, start = _excerpt(shown.get((record_id, kind), []), terms)
            name = record["title"] or record["original_name"] or f"Recording {record_id}"
            hits.append(
                Hit(
                    record_id=record_id,
                    name=str(name),
                    kind=kind,
                    rank=rank,
                    snippet=parts,
                    start=start,
                    created_at=float(record["created_at"]),
                )
            )
    return hits
