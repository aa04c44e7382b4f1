"""Statements of search: keeping ``search_texts`` in step with a record, and the ranked match.

SQLite matches the FTS5 table ``search_texts_fts`` (BM25 rank); PostgreSQL matches the stored
``tsv`` (``ts_rank``). Ranking reads each matched text's positions (a 10-minute transcript's
``tsvector`` is ~15 KB, stored apart), so it is linear in the matches: only the
:data:`RANKED` most recently written of the owner's matching texts are ranked, which both
indexes give cheaply (FTS5 walks its doclist by rowid, newest first, and stops; PostgreSQL's
GIN index gives the matching rows without reading their ``tsvector``). A query whose matches
are fewer is ranked exactly. Snippets are cut from the texts afterwards, for the hits only
(:mod:`conveyor.audio.search`): ``snippet()`` and ``ts_headline`` read whole 10-minute
transcripts and cost more than the match itself.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from sqlalchemy import (
    Connection,
    Float,
    RowMapping,
    Text,
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
    "PREFIX_FROM",
    "RANKED",
    "SEARCHED_KINDS",
    "fts5_query",
    "index_record",
    "match",
    "records_named",
    "shown_texts",
]

SEARCHED_KINDS = ("transcript", "proofread")
"""The kinds of ``texts`` search reads (beside the record's title and brief)."""

RANKED = 500
"""At most this many of the owner's matching texts (the most recently written) are ranked.

A word said in most of 10,000 recordings matches ~10,000 transcripts; ranking them all took
~1 s (SQLite) and ~150 ms (PostgreSQL) on the benchmark (docs/performance.md), ranking 500
takes a few milliseconds. Fewer matches are all ranked."""

PREFIX_FROM = 4
"""On SQLite the query's last word also finds longer words that start with it when it has
at least this many characters: a shorter one (``the``) would stand for dozens of common words
whose lists FTS5 must merge in full (40 ms for ``the*`` at 10,000 recordings)."""


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
    person's text is read as syntax), the last also as the start of a longer word when it
    has :data:`PREFIX_FROM` characters or more."""
    quoted = ['"' + w.replace('"', '""') + '"' for w in words]
    if len(words[-1]) >= PREFIX_FROM:
        quoted[-1] += " *"
    return " ".join(quoted)


def match(
    conn: Connection,
    owner: str,
    words: Sequence[str],
    phrase: str,
    limit: int,
    *,
    ranked: int = RANKED,
) -> tuple[Sequence[RowMapping], list[str]]:
    """The best ``limit`` rows of ``owner``'s ``search_texts`` for the query (``record_id``,
    ``kind``, ``rank``: higher is better) among the ``ranked`` most recently written rows
    that match, and the terms to mark in what is shown: the dictionaries' lexemes on
    PostgreSQL (``meet`` for "meetings"), the words themselves on SQLite.

    Args:
        words: the query's words (SQLite: all must occur, the last may be a prefix, see
            :func:`fts5_query`).
        phrase: the query as typed (PostgreSQL's ``websearch_to_tsquery``: all words, "quoted
            phrases", ``-not``, ``or``), read by every dictionary the owner's rows use.
        ranked: how many matching rows are ranked at most (:data:`RANKED`).
    """
    if conn.dialect.name == "sqlite":
        # The inner SELECT walks the FTS5 doclist newest first and stops at ``ranked`` of
        # the owner's rows (FTS5 takes ORDER BY rowid DESC itself), so bm25() runs that
        # often; BM25's document frequencies still count every match, so ranks compare.
        statement = text(
            "SELECT record_id, kind, rank FROM ("
            " SELECT s.id AS id, s.record_id AS record_id, s.kind AS kind,"
            "  -bm25(search_texts_fts) AS rank"
            " FROM search_texts_fts JOIN search_texts s ON s.id = search_texts_fts.rowid"
            " WHERE search_texts_fts MATCH :query AND s.owner = :owner"
            " ORDER BY search_texts_fts.rowid DESC LIMIT :ranked"
            ") ORDER BY rank DESC, id DESC LIMIT :limit"
        )
        params = {"query": fts5_query(words), "owner": owner, "limit": limit, "ranked": ranked}
        return conn.execute(statement, params).mappings().all(), [w.lower() for w in words]
    # The owner's dictionaries, one index probe each (a loose index scan of (owner, config)),
    # not a walk over every row of the owner.
    configs = (
        conn.execute(
            text(
                "WITH RECURSIVE c(config) AS ("
                " SELECT min(config) FROM search_texts WHERE owner = :owner"
                " UNION ALL SELECT (SELECT min(config) FROM search_texts"
                "  WHERE owner = :owner AND config > c.config) FROM c"
                " WHERE c.config IS NOT NULL) "
                "SELECT config FROM c WHERE config IS NOT NULL"
            ),
            {"owner": owner},
        )
        .scalars()
        .all()
    )
    if not configs:
        return [], []
    query: Any = None
    for n, config in enumerate(sorted(configs)):
        one = func.websearch_to_tsquery(
            cast(bindparam(f"config_{n}", config), REGCONFIG), bindparam("phrase", phrase)
        )
        query = one if query is None else query.op("||")(one)
    # The planner counts a 10-minute transcript's tsvector as cheap to read, but it is stored
    # apart (TOAST): a scan by owner, or of the table, reads every one. The match goes through
    # the GIN index alone (exact for these queries: no row is read to recheck it), and the
    # owner is checked on the rows it finds (``owner || ''`` keeps the owner index out). The
    # matches' ids are gathered first (MATERIALIZED: no tsvector read), then only the newest
    # ``ranked`` are read again by primary key for ts_rank.
    conn.execute(text("SET LOCAL enable_seqscan = off"))
    matched = (
        select(search_texts.c.id)
        .where(search_texts.c.owner.concat("") == owner, search_texts.c.tsv.op("@@")(query))
        .cte("matched")
        .prefix_with("MATERIALIZED", dialect="postgresql")
    )
    newest = select(matched.c.id).order_by(matched.c.id.desc()).limit(ranked).subquery("newest")
    rank = cast(func.ts_rank(search_texts.c.tsv, query), Float).label("rank")
    best = (
        select(search_texts.c.record_id, search_texts.c.kind, rank)
        .select_from(newest.join(search_texts, search_texts.c.id == newest.c.id))
        .order_by(rank.desc(), search_texts.c.id.desc())  # (by the label: ranked once)
        .limit(limit)
    )
    rows = conn.execute(best).mappings().all()
    shown = conn.execute(select(cast(query, Text))).scalar() or ""
    # Lexemes of the query as PostgreSQL prints it: 'meet' & 'budget' | !'x' (no negated ones).
    lexemes = re.findall(r"(?<!!)'((?:[^']|'')+)'", shown)
    return rows, [x.replace("''", "'") for x in lexemes]


def shown_texts(
    conn: Connection, hits: Sequence[tuple[int, str]]
) -> dict[tuple[int, str], list[dict[str, Any]]]:
    """What each hit ``(record_id, kind)`` shows, read together: the timed segments of a
    transcript or correction (one untimed segment for a text without times), or a title or
    brief as one untimed segment."""
    found: dict[tuple[int, str], list[dict[str, Any]]] = {}
    timed = [(r, k) for r, k in hits if k in SEARCHED_KINDS]
    other = [(r, k) for r, k in hits if k not in SEARCHED_KINDS]
    if timed:
        rows = conn.execute(
            select(texts.c.record_id, texts.c.kind, texts.c.segments).where(
                texts.c.record_id.in_({r for r, _ in timed}), texts.c.kind.in_(SEARCHED_KINDS)
            )
        )
        for row in rows:
            if row.segments:
                found[(int(row.record_id), str(row.kind))] = list(row.segments)
    untimed = other + [h for h in timed if h not in found]
    if untimed:
        rows = conn.execute(
            select(search_texts.c.record_id, search_texts.c.kind, search_texts.c.body).where(
                search_texts.c.record_id.in_({r for r, _ in untimed})
            )
        )
        for row in rows:
            key = (int(row.record_id), str(row.kind))
            if key in untimed:
                found[key] = [{"start": None, "text": row.body}]
    return found


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
