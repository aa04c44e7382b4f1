"""Cost flat with history: a claim over 10,000 waiting records beside 1,000,000 finished ones
reads only open records, on both databases, with and without ``ANALYZE`` after the bulk load.

The plan of the audio lane's real claim statement is read (``EXPLAIN``): every access to the
record table goes through the partial claim indexes (open records only) or the primary key,
never a scan of the table, where the finished records are. The history is made in one
statement on each database (``generate_series``; a recursive CTE on SQLite).
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import Connection, Engine, event, insert, text

from conveyor.audio.stages import AUDIO
from conveyor.clock import SystemClock
from conveyor.db.tables import files
from conveyor.pipeline import Advance, Domain, StepContext, queries
from conveyor.pipeline.outcomes import Outcome
from conveyor.pipeline.producer import LaneClaims, claim_jobs

FINISHED, WAITING = 1_000_000, 10_000


def noop(_ctx: StepContext) -> Outcome:
    return Advance()


def fill(conn: Connection, finished: int = FINISHED, waiting: int = WAITING) -> None:
    conn.execute(
        insert(files).values(
            id=1, key="u/1", mime_type="audio/wav", size=1, state="stored", created_at=0.0
        )
    )
    total = finished + waiting
    columns = (
        "owner, created_at, original_file_id, raw_pcm, stage, state_entered_at, attempts, "
        "updated_at"
    )
    values = (
        f"'ann', n, 1, false, CASE WHEN n <= {finished} THEN 'done' ELSE 'uploaded' END, n, 0, n"
    )
    if conn.dialect.name == "postgresql":
        conn.execute(
            text(
                f"INSERT INTO audio_records ({columns}) "
                f"SELECT {values} FROM generate_series(1, {total}) AS g(n)"
            )
        )
    else:
        conn.execute(
            text(
                f"WITH RECURSIVE g(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM g "
                f"WHERE n < {total}) INSERT INTO audio_records ({columns}) "
                f"SELECT {values.replace('false', '0')} FROM g"
            )
        )


def claim_sql(engine: Engine, domain: Domain) -> tuple[str, Any]:
    """The audio lane's claim as its producer sends it (on PostgreSQL the claim and its read in
    one statement), with its parameters; run once in a transaction rolled back."""
    claims = LaneClaims(domain, "audio", queries.now_of(SystemClock()))
    seen: list[tuple[str, Any]] = []

    def capture(_c: Any, _cur: Any, sql: str, params: Any, *_a: Any) -> None:
        seen.append((sql, params))

    event.listen(engine, "before_cursor_execute", capture)
    try:
        with engine.connect() as conn, conn.begin() as tx:
            if engine.dialect.name == "postgresql":
                assert len(queries.claim_and_read(conn, claims.started_read, 4)) == 4
            else:
                assert len(queries.claim_with(conn, claims.started, 4)) == 4
            tx.rollback()
    finally:
        event.remove(engine, "before_cursor_execute", capture)
    (found,) = [s for s in seen if s[0].lstrip().upper().startswith(("UPDATE", "WITH"))]
    return found


def plan_of(engine: Engine, sql: str, params: Any, setting: str | None = None) -> list[str]:
    with engine.connect() as conn:
        if engine.dialect.name == "sqlite":
            rows = conn.exec_driver_sql("EXPLAIN QUERY PLAN " + sql, params)
            return [str(r[3]) for r in rows]
        with conn.begin() as tx:
            if setting is not None:
                conn.exec_driver_sql(setting)
            plan = [
                str(r[0])
                for r in conn.exec_driver_sql("EXPLAIN (ANALYZE, TIMING OFF) " + sql, params)
            ]
            tx.rollback()
        return plan


def test_p5_a_claim_beside_a_million_finished_records_reads_only_open_ones(engine: Engine) -> None:
    domain = AUDIO.bind({name: noop for name in AUDIO.stage_names[:-1]})
    with engine.begin() as conn:
        fill(conn)
    sql, params = claim_sql(engine, domain)
    assert_reads_only_open_records(engine, plan_of(engine, sql, params))  # no statistics yet
    with engine.begin() as conn:
        conn.execute(text("ANALYZE"))
    assert_reads_only_open_records(engine, plan_of(engine, sql, params))


def assert_reads_only_open_records(engine: Engine, plan: list[str]) -> None:
    """Every read of the table goes by an index of open records or by the primary key."""
    if engine.dialect.name == "sqlite":
        touching = [s for s in plan if "audio_records" in s]
        assert touching, plan
        assert all(
            any(
                f"USING {kind}INDEX ix_audio_records_{name}" in s
                for kind in ("", "COVERING ")
                for name in ("claim", "begun")
            )
            or "INTEGER PRIMARY KEY" in s
            for s in touching
        ), plan
        assert not any("TEMP B-TREE" in s for s in plan), plan
        # Each part of the claim reads its own index (D19): begun records, then the rest.
        scans = [s for s in touching if "INDEX" in s]
        assert "ix_audio_records_begun" in scans[0] and "ix_audio_records_claim" in scans[1], plan
        return
    text_plan = "\n".join(plan)
    assert "Seq Scan" not in text_plan, text_plan
    # The claim walks its partial indexes in claim order and stops at its limit, statistics or
    # not: it never sorts the open records (without statistics it used to read and sort all
    # 10,000 per claim). Only the read of the few claimed rows is sorted.
    assert not any("Sort Key: audio_records" in s for s in plan), text_plan
    assert all("Sort Key: claimed." in s for s in plan if "Sort Key" in s), text_plan
    scans = [s for s in plan if " on audio_records" in s and "Scan" in s]
    assert scans, text_plan
    # Bitmap heap scans are fed by the partial indexes (their recheck names the predicate).
    for s in scans:
        assert (
            "ix_audio_records_claim" in s
            or "ix_audio_records_begun" in s
            or "pk_audio_records" in s
            or "Bitmap Heap Scan" in s
        ), text_plan
    bitmaps = [s for s in plan if "Bitmap Index Scan" in s]
    assert all(
        "ix_audio_records_claim" in s or "ix_audio_records_begun" in s or "pk_audio_records" in s
        for s in bitmaps
    )
    assert "Index Scan using pk_audio_records" in text_plan or (
        "Bitmap Index Scan on pk_audio_records" in text_plan
    ), text_plan
    assert "ix_audio_records_begun" in text_plan and "ix_audio_records_claim" in text_plan


def test_p5_a_fresh_table_without_statistics_claims_without_sorting(engine: Engine) -> None:
    """10,000 records bulk-loaded into a fresh table, no history, before any ``ANALYZE``: on
    PostgreSQL the planner guesses the partial index nearly empty and would read and sort every
    open record per claim; the producer's claim runs under ``NO_SORT`` until the table has
    statistics, and walks the index instead. SQLite's plan never depended on statistics."""
    domain = AUDIO.bind({name: noop for name in AUDIO.stage_names[:-1]})
    with engine.begin() as conn:
        fill(conn, finished=0)
    sql, params = claim_sql(engine, domain)
    if engine.dialect.name == "sqlite":
        assert_reads_only_open_records(engine, plan_of(engine, sql, params))
        return
    with engine.begin() as conn:
        # A table never analysed, as after a fresh install: TRUNCATE (between tests) keeps the
        # statistics an earlier test's ANALYZE left, so they are removed (the tests' role is a
        # superuser).
        conn.execute(text("DELETE FROM pg_statistic WHERE starelid = 'audio_records'::regclass"))
    claims = LaneClaims(domain, "audio", queries.now_of(SystemClock()))
    with engine.connect() as conn:
        assert claims.needs_no_sort(conn)
    # The case is real: left to itself, the planner sorts the open records.
    assert any("Sort Key: audio_records" in s for s in plan_of(engine, sql, params))
    hinted = plan_of(engine, sql, params, queries.NO_SORT)
    assert_reads_only_open_records(engine, hinted)
    assert not any("JIT" in s for s in hinted), hinted  # compiling it took seconds
    # The producer's own claim takes that path, in claim order (oldest first in audio).
    sent: list[str] = []

    def capture(_c: Any, _cur: Any, sql: str, *_a: Any) -> None:
        sent.append(sql)

    event.listen(engine, "before_cursor_execute", capture)
    try:
        with engine.connect() as conn:
            jobs = claim_jobs(conn, claims, 4)
    finally:
        event.remove(engine, "before_cursor_execute", capture)
    assert [j.record["created_at"] for j in jobs] == [1, 2, 3, 4]
    assert sent[0] == queries.NO_SORT and sent[1].lstrip().startswith("WITH"), sent
    with engine.begin() as conn:
        conn.execute(text("ANALYZE audio_records"))
    with engine.connect() as conn:
        fresh = LaneClaims(domain, "audio", queries.now_of(SystemClock()))
        assert not fresh.needs_no_sort(conn)  # and the claim is one statement again
    assert_reads_only_open_records(engine, plan_of(engine, sql, params))
