"""Round trips of one photo, intake to done, per phase: to SQLite or PostgreSQL, and to the store.

A worker far from its database and bucket (another rack or zone, issue 24) pays a link's round
trip for each: the counts are the photo's cost there, and this test holds them. The phases are
the pool's own code, run one after another: the producer's claim (:func:`claim_jobs`), the
executor's step (:meth:`Executor.execute`) and the completer's save (:class:`Saver`).
"""

from __future__ import annotations

import threading
from collections import Counter
from typing import Any

import pytest
from sqlalchemy import Engine, select

from conveyor.clock import SystemClock
from conveyor.db.tables import album_events, media_items, media_objects, record_events
from conveyor.media.domain import SHORT_LANE
from conveyor.objects import ObjectStore
from conveyor.pipeline import Executor
from conveyor.pipeline.claims import Held
from conveyor.pipeline.producer import LaneClaims, claim_jobs
from conveyor.pipeline.queries import now_of
from tests.support.media import PIPELINE, add, album, media_domain
from tests.support.needs import MEDIA_CORPUS, need_corpus
from tests.support.round_trips import RoundTrips

# Issue 24's budget: at most 10 database round trips per photo between a worker and PostgreSQL.
WORKER_BUDGET = 10

# What one photo costs the worker now, phase by phase. PostgreSQL: the claim and its read are
# one statement in its own transaction; the step reads the item's roles; the save is BEGIN, the
# fenced record write, ONE statement for the journal rows, the role rows and the album's event
# (with its lock and notification), the record's journal row, COMMIT. SQLite (in the process,
# no link) keeps its BEGIN IMMEDIATE and COMMIT around each, a separate read after the claim and
# a statement per table.
EXPECTED = {
    "postgresql": {"claim": 1, "step": 1, "save": 5},
    "sqlite": {"claim": 4, "step": 3, "save": 8},
}
# A prefetched record (``[pipeline] prefetch``) is started by its executor: one guarded update
# that returns the database's time, in its own transaction.
START = {"postgresql": 1, "sqlite": 3}


@pytest.mark.parametrize("prefetched", [False, True], ids=["claimed-idle", "prefetched"])
def test_one_photo_costs_the_worker_at_most_ten_database_round_trips(
    engine: Engine, object_store: ObjectStore, prefetched: bool
) -> None:
    photo = need_corpus(MEDIA_CORPUS) / "exif-samples__landscape_6.jpg"  # 600 px: 2 variants
    clock = SystemClock()
    domain = media_domain(object_store)
    album_id = album(engine, clock)
    trips = RoundTrips(engine)
    requests: Counter[str] = Counter()
    lock = threading.Lock()

    def on_request(**kw: Any) -> None:
        with lock:
            requests[trips.current] += 1

    client = getattr(object_store, "client", None)  # an S3 bucket's boto3 client
    if client is not None:
        client.meta.events.register("before-send.s3", on_request)
    try:
        with trips.phase("intake"):
            item_id = add(engine, object_store, clock, album_id, photo)
        claims = LaneClaims(domain, SHORT_LANE, now_of(clock))
        executor = Executor(engine, clock, PIPELINE, held=Held())
        with engine.connect() as conn:
            if engine.dialect.name == "postgresql":
                # The budget is a running worker's: its table has statistics (autovacuum's first
                # ANALYZE; until then each claim pays a transaction of its own, three round
                # trips more, docs/lifecycle.md) and its claims have looked them up once.
                with conn.begin():
                    conn.exec_driver_sql("ANALYZE media_items")
                assert not claims.needs_no_sort(conn)
            with trips.phase("claim"):
                (job,) = claim_jobs(conn, claims, 4, started=not prefetched, holder="host:1")
            with trips.phase("step"):
                finished = executor.execute(job)
            assert finished is not None
            with trips.phase("save"):
                (applied,) = executor.saver.save(conn, [finished])
    finally:
        trips.close()
        if client is not None:
            client.meta.events.unregister("before-send.s3", on_request)
    assert applied is not None and applied.outcome == "advanced"
    assert job.claim.record_id == item_id
    with engine.connect() as conn:
        assert conn.execute(select(media_items.c.stage)).scalar_one() == "done"
        roles = set(conn.execute(select(media_objects.c.role)).scalars())
        kinds = list(conn.execute(select(album_events.c.kind)).scalars())
        outcomes = list(conn.execute(select(record_events.c.outcome)).scalars())
    # Everything the photo's pipeline writes is there: the roles, the album's event, the journal.
    assert roles == {"original", "thumb", "medium", "preview"}
    assert kinds == ["item.ready"] and outcomes == ["accepted", "advanced"]

    worker = {phase: trips.counts[phase] for phase in ("claim", "step", "save")}
    expected = dict(EXPECTED[engine.dialect.name])
    if prefetched:
        expected["step"] += START[engine.dialect.name]
    assert worker == expected, trips.report()
    if engine.dialect.name == "postgresql":
        assert sum(worker.values()) <= WORKER_BUDGET, trips.report()
    if client is not None:
        # The original up once; then down once, and up once per object (the medium and the
        # preview of a 600 px photo are one object): no HEAD after a PUT, no multipart.
        assert dict(requests) == {"intake": 1, "step": 3}
