"""Batched claims and saves keep P1-P6; a save that fails is a failed attempt."""

from __future__ import annotations

import threading
from typing import Any

from sqlalchemy import Connection, Engine, event, insert, select

from conveyor.config import PipelineSettings
from conveyor.pipeline import Advance, Executor, StepContext, queries
from conveyor.pipeline.outcomes import Outcome
from conveyor.testing import FakeClock
from tests.support.jobs_domain import add_jobs, effects, events_of, job, jobs, make_domain


def test_p1_p2_p5_one_statement_claims_a_batch_in_order_each_with_its_own_token(
    db: Engine, clock: FakeClock
) -> None:
    domain = make_domain()
    sorts = [5.0, 1.0, 4.0, 1.0, 3.0, 2.0, 9.0]
    ids = add_jobs(db, len(sorts), clock.now(), sort=lambda i: sorts[i])
    statement = queries.claim_statement(
        domain, domain.lane_stages("default"), queries.now_of(clock)
    )
    with db.begin() as conn:
        claims = queries.claim_with(conn, statement, 4)
    expected = [i for _, i in sorted(zip(sorts, ids, strict=True))][:4]
    assert sorted(c.record_id for c in claims) == sorted(expected)
    assert len({c.token for c in claims}) == 4 and all(len(c.token) == 32 for c in claims)
    first, second = claims[0], claims[1]
    with db.begin() as conn:
        # Each write is fenced by its own record's token, not by any token of the batch.
        assert not queries.save_if_held(
            conn, domain, type(first)(first.record_id, second.token), {"result": "x"}
        )
        assert queries.save_if_held(conn, domain, first, {"result": "mine"})
    assert job(db, first.record_id)["result"] == "mine"


def test_p3_concurrent_batch_claims_never_share_a_record(
    db: Engine, clock: FakeClock, settings: PipelineSettings
) -> None:
    domain = make_domain()
    add_jobs(db, 30, clock.now())
    barrier = threading.Barrier(3)
    got: list[list[int]] = []
    lock = threading.Lock()

    def claimer() -> None:
        statement = queries.claim_statement(
            domain, domain.lane_stages("default"), queries.now_of(clock)
        )
        barrier.wait()
        mine: list[int] = []
        while True:
            with db.begin() as conn:
                claims = queries.claim_with(conn, statement, 4)
            if not claims:
                break
            mine += [c.record_id for c in claims]
        with lock:
            got.append(mine)

    threads = [threading.Thread(target=claimer) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    every = [i for mine in got for i in mine]
    assert len(every) == len(set(every)) == 30


def test_batch_saves_every_outcome_together_with_one_claim_and_one_save_transaction(
    db: Engine, clock: FakeClock, settings: PipelineSettings
) -> None:
    domain = make_domain()
    ids = add_jobs(db, 8, clock.now())
    executor = Executor(db, clock, settings)
    statements: list[str] = []

    def capture(_c: Any, _cur: Any, statement: str, *_a: Any) -> None:
        statements.append(" ".join(statement.split()).upper())

    event.listen(db, "before_cursor_execute", capture)
    try:
        with db.connect() as conn:
            assert executor.run_batch(conn, domain, "default", limit=8) == 8
    finally:
        event.remove(db, "before_cursor_execute", capture)
    assert [job(db, i)["stage"] for i in ids] == ["waiting"] * 8
    assert all(events_of(db, i)[-1]["outcome"] == "advanced" for i in ids)
    claims = [s for s in statements if s.startswith(("UPDATE", "WITH")) and "RETURNING" in s]
    assert len(claims) == 1
    reads = [s for s in statements if s.startswith("SELECT TEST_JOBS.ID")]
    if db.dialect.name == "postgresql":
        # The claim and its read are one statement: the read is the claim's own WITH.
        assert claims[0].startswith("WITH") and not reads
    else:
        assert len(reads) == 1


def test_a_failing_save_is_a_failed_attempt_with_its_error_then_attempts_exhausted(
    db: Engine, clock: FakeClock, settings: PipelineSettings
) -> None:
    def duplicate_effect(conn: Connection) -> None:
        # The same primary key twice: a constraint violation inside the outcome's transaction.
        conn.execute(insert(effects).values(id=1, job_id=0, stage="new", token="t"))
        conn.execute(insert(effects).values(id=1, job_id=0, stage="new", token="t"))

    def step(ctx: StepContext) -> Outcome:
        return Advance({"result": "saved?"}, writes=duplicate_effect)

    domain = make_domain(new=step)
    (jid,) = add_jobs(db, 1, clock.now())
    executor = Executor(db, clock, settings)
    for attempt in range(1, settings.max_attempts):
        assert executor.run_once(domain, "default")
        row = job(db, jid)
        assert row["attempts"] == attempt and row["stage"] == "new" and row["result"] is None
        assert row["claim_token"] is None  # released, not left to expire
        pause = row["retry_at"] - clock.now()
        ceiling = settings.retry_base * 2 ** (attempt - 1)
        assert ceiling / 2 <= pause <= ceiling  # the usual retry pause
        text = events_of(db, jid)[-1]["outcome_text"]
        assert events_of(db, jid)[-1]["outcome"] == "failed"
        assert "saving the outcome failed: IntegrityError" in text
        assert not executor.run_once(domain, "default")
        clock.advance(pause)
    assert executor.run_once(domain, "default")
    row = job(db, jid)
    assert row["halt_reason"] == "attempts_exhausted"
    assert "IntegrityError" in row["halt_error"]
    with db.connect() as conn:
        assert conn.execute(select(effects)).first() is None  # nothing of the failed saves


def test_a_failing_save_in_a_batch_fails_only_its_own_record(
    db: Engine, clock: FakeClock, settings: PipelineSettings
) -> None:
    def step(ctx: StepContext) -> Outcome:
        def effect(conn: Connection) -> None:
            if ctx.record["title"] == "job 1":
                raise RuntimeError("disk full")
            conn.execute(insert(effects).values(job_id=ctx.claim.record_id, stage="new", token="t"))

        return Advance({"result": "ok"}, writes=effect)

    domain = make_domain(new=step)
    a, b, c = add_jobs(db, 3, clock.now())
    with db.connect() as conn:
        assert Executor(db, clock, settings).run_batch(conn, domain, "default", limit=3) == 3
    assert [job(db, i)["stage"] for i in (a, b, c)] == ["waiting", "new", "waiting"]
    assert job(db, b)["attempts"] == 1
    assert "RuntimeError: disk full" in events_of(db, b)[-1]["outcome_text"]
    with db.connect() as conn:
        assert sorted(conn.execute(select(effects.c.job_id)).scalars()) == [a, c]
    assert job(db, a)["title"] == "job 0" and jobs.c.title is not None


def test_p6_a_batch_of_steps_with_extra_writes_runs_them_only_for_the_claims_that_held(
    db: Engine, clock: FakeClock, settings: PipelineSettings
) -> None:
    """The guarded writes of a batch go out together, and a step's extra writes run only once
    its own guarded write matched: three records with extra writes, the middle one re-issued
    under its step, saved in one batch. The two held ones get their effect row (and a field an
    extra write returned), the lost one nothing: no effect, no stage, no journal row."""

    def step(ctx: StepContext) -> Outcome:
        record_id, token = ctx.claim.record_id, ctx.claim.token
        if ctx.record["title"] == "job 1":
            with db.begin() as conn:  # re-issued under the step (P2)
                conn.execute(
                    jobs.update().where(jobs.c.id == record_id).values(claim_token="e" * 32)
                )

        def effect(conn: Connection) -> dict[str, Any]:
            conn.execute(insert(effects).values(job_id=record_id, stage="new", token=token))
            return {"waited": record_id}

        return Advance({"result": "ok"}, writes=effect)

    domain = make_domain(new=step)
    a, b, c = add_jobs(db, 3, clock.now())
    with db.connect() as conn:
        assert Executor(db, clock, settings).run_batch(conn, domain, "default", limit=3) == 3
    rows = [job(db, i) for i in (a, b, c)]
    assert [(r["stage"], r["result"], r["waited"]) for r in rows] == [
        ("waiting", "ok", a),
        ("new", None, None),
        ("waiting", "ok", c),
    ]
    with db.connect() as conn:
        done = sorted(conn.execute(select(effects.c.job_id)).scalars())
    assert done == [a, c]
    assert "advanced" not in [e["outcome"] for e in events_of(db, b)]
    assert events_of(db, a)[-1]["outcome"] == events_of(db, c)[-1]["outcome"] == "advanced"
