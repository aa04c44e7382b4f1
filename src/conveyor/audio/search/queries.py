"""Statements of search: keeping ``search_texts`` in step with a record, and the ranked match.

SQLite matches the FTS5 table ``search_texts_fts`` (BM25 rank, ``snippet()``); PostgreSQL
matches the stored ``tsv`` (``ts_rank``, ``ts_headline`` for the rows returned only).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import (
    Connection,
    Float,
    RowMapping,
    bindparam,
    cast,
    delete,
    func,
    insert,
    select,
    text,
)
from sqlalchemy.dialects.postgresql import REGCONFIG

from conveyor.audio.search.dictionaries import dictionary_of
from conveyor.db.tables import audio_records, search_texts, texts

__all__ = [
    "MARK_END",
    "MARK_START",
    "SEARCHED_KINDS",
    "fts5_query",
    "index_record",
    "match",
    "records_named",
    "segments_of",
]

# Around each matched word of a snippet (control characters no text of ours contains).
MARK_START = "\x02"
MARK_END = "\x03"
SEARCHED_KINDS = ("transcript", "proofread")
"""The kinds of ``texts`` search reads (beside the record's title and brief)."""
_SNIPPET_WORDS = 24


def index_record(conn: Connection, record_id: int) -> None:
    """Write the record's rows of ``search_texts`` afresh from its title, brief, transcript and
    correction (in the caller's transaction, so search sees what was just written)."""
    conn.execute(delete(search_texts).where(search_texts.c.record_id == record_id))
    record = (
        conn.execute(
            select(
                audio_records.c.owner,
                audio_records.c.title,
                audio_records.c.brief,
                audio_records.c.language,
                audio_records.c.detected_language,
            ).where(audio_records.c.id == record_id)
        )
        .mappings()
        .first()
    )
    if record is None:
        return
    language = record["language"] or record["detected_language"]
    rows: list[dict[str, Any]] = [
        {"kind": kind, "body": record[kind], "config": dictionary_of(language)}
        for kind in ("title", "brief")
        if record[kind]
    ]
    for t in conn.execute(
        select(texts.c.kind, texts.c.body, texts.c.language).where(
            texts.c.record_id == record_id, texts.c.kind.in_(SEARCHED_KINDS)
        )
    ).mappings():
        if t["body"]:
            config = dictionary_of(t["language"] or language)
            rows.append({"kind": t["kind"], "body": t["body"], "config": config})
    postgresql = conn.dialect.name == "postgresql"
    for row in rows:
        values = {**row, "record_id": record_id, "owner": record["owner"]}
        if postgresql:
            values["tsv"] = func.to_tsvector(cast(row["config"], REGCONFIG), row["body"])
        conn.execute(insert(search_texts).values(**values))


def fts5_query(words: Sequence[str]) -> str:
    """An FTS5 query that matches every one of ``words`` (each quoted: no operator of the
    person's text is read as syntax), the last also as the start of a longer word."""
    quoted = ['"' + w.replace('"', '""') + '"' for w in words]
    quoted[-1] += " *"
    return " ".join(quoted)


def match(
    conn: Connection, owner: str, words: Sequence[str], phrase: str, limit: int
) -> Sequence[RowMapping]:
    """The best ``limit`` rows of ``owner``'s ``search_texts`` for the query: ``record_id``,
    ``kind``, ``rank`` (higher is better) and ``snippet`` (matched words between
    :data:`MARK_START` and :data:`MARK_END`).

    Args:
        words: the query's words (SQLite: all must occur, the last may be a prefix).
        phrase: the query as typed (PostgreSQL's ``websearch_to_tsquery``: all words, "quoted
            phrases", ``-not``, ``or``), read by every dictionary the owner's rows use.
    """
    if conn.dialect.name == "sqlite":
        # Ranked first, the snippets made for the rows kept only (snippet() is costly, and
        # SQLite would make one for every match before its sort).
        statement = text(
            "WITH best AS ("
            "  SELECT s.id AS id, -bm25(search_texts_fts) AS rank"
            "  FROM search_texts_fts JOIN search_texts s ON s.id = search_texts_fts.rowid"
            "  WHERE search_texts_fts MATCH :query AND s.owner = :owner"
            "  ORDER BY bm25(search_texts_fts) LIMIT :limit) "
            "SELECT s.record_id AS record_id, s.kind AS kind, best.rank AS rank, "
            f"snippet(search_texts_fts, 0, :start, :end, '…', {_SNIPPET_WORDS}) AS snippet "
            "FROM search_texts_fts JOIN best ON best.id = search_texts_fts.rowid "
            "JOIN search_texts s ON s.id = best.id "
            "WHERE search_texts_fts MATCH :query ORDER BY best.rank DESC, s.id DESC"
        )
        params = {
            "start": MARK_START,
            "end": MARK_END,
            "query": fts5_query(words),
            "owner": owner,
            "limit": limit,
        }
        return conn.execute(statement, params).mappings().all()
    configs = (
        conn.execute(select(search_texts.c.config).where(search_texts.c.owner == owner).distinct())
        .scalars()
        .all()
    )
    if not configs:
        return []
    query: Any = None
    for n, config in enumerate(sorted(configs)):
        one = func.websearch_to_tsquery(
            cast(bindparam(f"config_{n}", config), REGCONFIG), bindparam("phrase", phrase)
        )
        query = one if query is None else query.op("||")(one)
    rank = func.ts_rank(search_texts.c.tsv, query).label("rank")
    best = (
        select(search_texts.c.id, search_texts.c.record_id, search_texts.c.kind, rank)
        .where(search_texts.c.owner == owner, search_texts.c.tsv.op("@@")(query))
        .order_by(rank.desc(), search_texts.c.id.desc())
        .limit(limit)
        .subquery()
    )
    options = (
        f"StartSel={MARK_START}, StopSel={MARK_END}, MaxWords={_SNIPPET_WORDS}, MinWords=8, "
        "MaxFragments=1, FragmentDelimiter=…"
    )
    headline = func.ts_headline(
        cast(search_texts.c.config, REGCONFIG), search_texts.c.body, query, options
    )
    ranked = (
        select(
            best.c.record_id,
            best.c.kind,
            cast(best.c.rank, Float).label("rank"),
            headline.label("snippet"),
        )
        .join_from(best, search_texts, search_texts.c.id == best.c.id)
        .order_by(best.c.rank.desc(), best.c.id.desc())
    )
    return conn.execute(ranked).mappings().all()


def segments_of(conn: Connection, record_id: int, kind: str) -> list[dict[str, Any]]:
    """The timed segments of the record's text of ``kind`` (empty for a title or brief)."""
    if kind not in SEARCHED_KINDS:
        return []
    found = conn.execute(
        select(texts.c.segments).where(texts.c.record_id == record_id, texts.c.kind == kind)
    ).scalar()
    return list(found or [])


def records_named(conn: Connection, record_ids: Sequence[int]) -> dict[int, RowMapping]:
    """``id``, ``title``, ``original_name``, ``created_at``, ``duration`` of each record."""
    if not record_ids:
        return {}
    query = select(
        audio_records.c.id,
        audio_records.c.title,
        audio_records.c.original_name,
        audio_records.c.created_at,
        audio_records.c.duration,
    ).where(audio_records.c.id.in_(record_ids))
    return {int(r["id"]): r for r in conn.execute(query).mappings()}
