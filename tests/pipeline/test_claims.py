"""Claims proven by behaviour, not by the text of their SQL (NORMS P2-P5, P9).

* P5: the tie-break decides only where the database would answer otherwise, so the rows are laid
  out in an order that differs from their ids (checked before the claims run);
* P3: on PostgreSQL a row locked by another open transaction is skipped, not waited for;
* P2/P4: the lease boundary — a claim is taken over exactly at its expiry, not a moment before;
* P9: resume clears a claim token and expiry that the halted row still carries.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest
from sqlalchemy import Engine, insert, select, text, update

from conveyor.config import PipelineSettings
from conveyor.pipeline import Claim, Domain, Executor, queries, resume
from conveyor.testing import FakeClock
from tests.support.jobs_domain import add_jobs, create_tables, job, jobs, make_domain

# Tied sort values, ids inserted in this order: neither ascending nor descending.
INSERT_ORDER = [6, 2, 5, 1, 4, 3, 9, 7, 8]
SORTS = {1: 2.0, 2: 1.0, 3: 1.0, 4: 2.0, 5: 1.0, 6: 1.0, 7: 2.0, 8: 1.0, 9: 2.0}


def insert_out_of_id_order(db: Engine, now: float) -> None:
    rows = [
        {
            "id": i,
            "owner": "ann",
            "title": f"job {i}",
            "sort_value": SORTS[i],
            "stage": "new",
            "state_entered_at": now,
            "attempts": 0,
            "updated_at": now,
        }
        for i in INSERT_ORDER
    ]
    with db.begin() as conn:
        for row in rows:  # one by one: each lands after the previous one
            conn.execute(insert(jobs).values(**row))


def order_without_tie_break(db: Engine, domain: Domain) -> list[int]:
    """What the database answers when asked by the sort value alone."""
    with db.connect() as conn:
        query = select(jobs.c.id).where(jobs.c.stage == "new").order_by(*domain.order_by)
        return list(conn.execute(query).scalars())


def claim_all(
    db: Engine, clock: FakeClock, settings: PipelineSettings, domain: Domain
) -> list[int]:
    executor = Executor(db, clock, settings)
    got = []
    while (claim := executor.claim(domain, "default")) is not None:
        got.append(claim.record_id)
    return got


def test_p5_ties_are_broken_by_primary_key_not_by_physical_order(
    db: Engine, clock: FakeClock, settings: PipelineSettings
) -> None:
    domain = make_domain()
    insert_out_of_id_order(db, clock.now())
    expected = sorted(INSERT_ORDER, key=lambda i: (SORTS[i], i))
    if db.dialect.name == "postgresql":
        # The heap holds the rows in insertion order, which is not id order.
        with db.connect() as conn:
            heap = list(conn.execute(text("SELECT id FROM test_jobs ORDER BY ctid")).scalars())
        assert heap == INSERT_ORDER
        assert order_without_tie_break(db, domain) != expected, "the data proves no tie-break"
    assert claim_all(db, clock, settings, domain) == expected


def test_p5_descending_sort_value_ties_still_go_by_primary_key(
    db: Engine, clock: FakeClock, settings: PipelineSettings
) -> None:
    """Newest-first domains (M6) sort descending; through an index the database then walks
    ties from the highest id down, so only the engine's tie-break puts the lowest id first."""
    domain = make_domain(order_by=[jobs.c.sort_value.desc()])
    with db.begin() as conn:  # dropped with the table; never part of the test metadata
        conn.execute(text("CREATE INDEX test_jobs_by_stage_sort ON test_jobs (stage, sort_value)"))
    insert_out_of_id_order(db, clock.now())
    expected = sorted(INSERT_ORDER, key=lambda i: (-SORTS[i], i))
    assert order_without_tie_break(db, domain) != expected, "the data proves no tie-break"
    assert claim_all(db, clock, settings, domain) == expected


@pytest.fixture
def pg_db(pg_engine: Engine) -> Iterator[Engine]:
    """PostgreSQL alone, with the engine-test tables (row locks are PostgreSQL's behaviour)."""
    create_tables(pg_engine)
    yield pg_engine


def claim_in_thread(
    db: Engine, clock: FakeClock, settings: PipelineSettings, domain: Domain
) -> tuple[threading.Thread, list[Claim | None]]:
    got: list[Claim | None] = []
    thread = threading.Thread(
        target=lambda: got.append(Executor(db, clock, settings).claim(domain, "default")),
        daemon=True,
    )
    thread.start()
    return thread, got


def test_p3_a_row_locked_by_an_open_transaction_is_skipped_not_waited_for(
    pg_db: Engine, clock: FakeClock, settings: PipelineSettings
) -> None:
    """Another claimer's transaction holds the first row in order (FOR UPDATE, not committed);
    a concurrent claim takes the second row. The lock is released only after that claim has
    returned, so a claim that waited for the lock would never return while it is held."""
    domain = make_domain()
    first, second = add_jobs(pg_db, 2, clock.now())
    holder = pg_db.connect()
    locked = holder.begin()
    try:
        holder.execute(select(jobs.c.id).where(jobs.c.id == first).with_for_update())
        thread, got = claim_in_thread(pg_db, clock, settings, domain)
        thread.join(timeout=60)  # only ends a hang: a waiting claim is the failure
        blocked = thread.is_alive()
    finally:
        locked.rollback()
        holder.close()
    thread.join(timeout=60)
    assert not blocked, "the claim waited for the locked row instead of skipping it"
    assert [c.record_id if c else None for c in got] == [second]
    # Unlocked, the skipped row is the next claim; nothing else is left.
    assert claim_all(pg_db, clock, settings, domain) == [first]


def test_p3_every_eligible_row_locked_means_no_work_now_not_a_wait(
    pg_db: Engine, clock: FakeClock, settings: PipelineSettings
) -> None:
    domain = make_domain()
    ids = add_jobs(pg_db, 3, clock.now())
    holder = pg_db.connect()
    locked = holder.begin()
    try:
        holder.execute(select(jobs.c.id).where(jobs.c.id.in_(ids)).with_for_update())
        thread, got = claim_in_thread(pg_db, clock, settings, domain)
        thread.join(timeout=60)
        blocked = thread.is_alive()
    finally:
        locked.rollback()
        holder.close()
    thread.join(timeout=60)
    assert not blocked, "the claim waited for locked rows instead of skipping them"
    assert got == [None]  # P12: no work now
    assert sorted(claim_all(pg_db, clock, settings, domain)) == ids


def test_p2_p4_a_claim_is_taken_over_exactly_at_its_expiry_not_before(
    db: Engine, clock: FakeClock, settings: PipelineSettings
) -> None:
    lease = 10.0
    domain = make_domain(new_lease=lease)
    (jid,) = add_jobs(db, 1, clock.now())
    executor = Executor(db, clock, settings)
    start = clock.now()
    first = executor.claim(domain, "default")
    assert first is not None
    assert job(db, jid)["claim_expires_at"] == start + lease
    clock.set(start + lease - 0.001)  # a moment before the lease ends: still held
    assert executor.claim(domain, "default") is None
    clock.set(start + lease)  # the lease ends now: the claim may be re-issued
    second = executor.claim(domain, "default")
    assert second is not None and second.record_id == jid and second.token != first.token
    assert job(db, jid)["claim_expires_at"] == start + 2 * lease
    with db.begin() as conn:
        assert not queries.save_if_held(conn, domain, first, {"result": "late"})
    assert job(db, jid)["result"] is None


def halt_while_claimed(db: Engine, jid: int, now: float, token: str, expires: float) -> None:
    """A halted row that still carries a claim (as a crash between writes could leave it)."""
    with db.begin() as conn:
        conn.execute(
            update(jobs)
            .where(jobs.c.id == jid)
            .values(
                halted_at=now,
                halt_reason="operator",
                halt_error="held for inspection",
                claim_token=token,
                claim_expires_at=expires,
                attempts=2,
                retry_at=now + 500,
            )
        )


def test_p9_resume_clears_the_claim_token_and_expiry_the_row_still_carries(
    db: Engine, clock: FakeClock, settings: PipelineSettings
) -> None:
    domain = make_domain()
    (jid,) = add_jobs(db, 1, clock.now())
    claim = Executor(db, clock, settings).claim(domain, "default")
    assert claim is not None
    expires = float(job(db, jid)["claim_expires_at"])
    halt_while_claimed(db, jid, clock.now(), claim.token, expires)
    clock.advance(5)
    row = job(db, jid)
    assert (row["claim_token"], row["claim_expires_at"]) == (claim.token, expires)

    assert resume(db, domain, jid, clock=clock) == "new"
    row = job(db, jid)
    assert (row["claim_token"], row["claim_expires_at"]) == (None, None)
    assert (row["halted_at"], row["halt_reason"], row["halt_error"]) == (None, None, None)
    assert (row["attempts"], row["retry_at"]) == (0, None)
    assert row["state_entered_at"] == clock.now()
    # Within the old lease, the record is claimable at once, and the old holder is fenced.
    assert clock.now() < expires
    again = Executor(db, clock, settings).claim(domain, "default")
    assert again is not None and again.token != claim.token
    with db.begin() as conn:
        assert not queries.save_if_held(conn, domain, claim, {"result": "stale"})
