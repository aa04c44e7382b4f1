"""How outcomes move a record, each proven from a state the outcome must change (P6, D3, D11).

Every test runs on SQLite and PostgreSQL; time is the fake clock.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any

from sqlalchemy import Engine, select, update

from conveyor.clock import SystemClock
from conveyor.config import PipelineSettings
from conveyor.db.tables import record_events
from conveyor.pipeline import Advance, Executor, Fail, StepContext, resume
from conveyor.pipeline.outcomes import Outcome
from conveyor.testing import FakeClock
from tests.support.jobs_domain import add_jobs, job, jobs, make_domain


def test_d3_advance_resets_failures_pause_and_the_time_in_stage(
    db: Engine, clock: FakeClock, settings: PipelineSettings
) -> None:
    """A record that failed once, then advanced, starts the next stage afresh: its failure count
    does not carry over (two failures there do not exhaust three attempts)."""
    first: Iterator[Outcome] = iter([Fail("flaky"), Advance({"result": "new ok"})])
    domain = make_domain(new=lambda ctx: next(first), waiting=lambda ctx: Fail("still busy"))
    (jid,) = add_jobs(db, 1, clock.now())
    entered = job(db, jid)["state_entered_at"]
    executor = Executor(db, clock, settings)
    first_claim = clock.now()
    assert executor.run_once(domain, "default")
    row = job(db, jid)
    assert (row["stage"], row["attempts"], row["state_entered_at"]) == ("new", 1, entered)
    assert row["work_started_at"] == first_claim  # the stuck countdown runs (D3)
    clock.advance(100)
    advanced_at = clock.now()
    assert executor.run_once(domain, "default")
    row = job(db, jid)
    assert (row["stage"], row["attempts"], row["retry_at"]) == ("waiting", 0, None)
    assert row["state_entered_at"] == advanced_at != entered
    assert row["work_started_at"] is None  # no countdown until the first claim in "waiting"
    for failures in range(1, settings.max_attempts):
        clock.advance(100)
        assert executor.run_once(domain, "default")
        row = job(db, jid)
        assert (row["attempts"], row["halted_at"]) == (failures, None)


def test_p6_a_claim_lost_before_its_step_starts_never_runs_the_step(
    db: Engine, clock: FakeClock, settings: PipelineSettings
) -> None:
    ran: list[int] = []

    def step(ctx: StepContext) -> Outcome:
        ran.append(ctx.claim.record_id)
        return Advance({"result": "ran"})

    domain = make_domain(new=step)
    (jid,) = add_jobs(db, 1, clock.now())
    executor = Executor(db, clock, settings)
    claim = executor.claim(domain, "default")
    assert claim is not None
    with db.begin() as conn:  # re-issued before the step began (a resume, an expiry)
        conn.execute(update(jobs).where(jobs.c.id == jid).values(claim_token="e" * 32))
    assert executor.run_claimed(domain, claim) is None
    assert ran == []
    row = job(db, jid)
    assert (row["stage"], row["result"], row["claim_token"]) == ("new", None, "e" * 32)


def test_d11_a_lane_claims_only_its_own_stages_and_never_a_terminal_one(
    db: Engine, clock: FakeClock, settings: PipelineSettings
) -> None:
    domain = make_domain(new_lane="short", waiting_lane="long")
    at_new, at_waiting, at_done = add_jobs(db, 3, clock.now())
    with db.begin() as conn:
        conn.execute(update(jobs).where(jobs.c.id == at_waiting).values(stage="waiting"))
        conn.execute(update(jobs).where(jobs.c.id == at_done).values(stage="done"))
    executor = Executor(db, clock, settings)

    def claimed(lane: str) -> list[Any]:
        got = []
        while (claim := executor.claim(domain, lane)) is not None:
            got.append(claim.record_id)
        return got

    assert claimed("short") == [at_new]
    assert claimed("long") == [at_waiting]
    assert claimed("default") == []  # a lane of no stage
    assert job(db, at_done)["claim_token"] is None


def test_m8_heartbeat_holds_a_claim_past_its_lease_in_real_time(
    db: Engine, settings: PipelineSettings
) -> None:
    """On the real clock a step outlives its 4.5 s lease more than twice over; a rival that
    tries all along never gets the record (the beats, every lease / 3, leave 3 s of slack each:
    a shared CI machine may hold a thread back a second or two)."""
    lease = 4.5
    clock = SystemClock()
    started = threading.Event()

    def long_step(ctx: StepContext) -> Outcome:
        started.set()
        ends = time.monotonic() + 2.5 * lease
        while time.monotonic() < ends:
            ctx.check()
            time.sleep(0.05)
        return Advance({"result": "held throughout"})

    # The next stage in a lane the rival does not claim: once the step's outcome is saved, the
    # rival's last try must not find the record there.
    domain = make_domain(new=long_step, new_lease=lease, heartbeat=True, waiting_lane="later")
    (jid,) = add_jobs(db, 1, clock.now())
    worker = Executor(db, clock, settings)
    runner = threading.Thread(target=worker.run_once, args=(domain, "default"))
    runner.start()
    rival = Executor(db, clock, settings)
    tries: list[Any] = []
    try:
        assert started.wait(60), "the step never started"
        while runner.is_alive():
            tries.append(rival.claim(domain, "default"))
            time.sleep(0.1)
    finally:
        runner.join()
    assert len(tries) >= 10 and tries == [None] * len(tries)  # tried all along, never got it
    row = job(db, jid)
    assert (row["stage"], row["result"]) == ("waiting", "held throughout")


def test_p6_a_batch_saves_its_held_claims_and_nothing_of_the_one_lost(
    db: Engine, clock: FakeClock, settings: PipelineSettings
) -> None:
    """Three records claimed in one statement; while their steps run, another holder takes the
    middle one. The save writes the two held outcomes and nothing of the lost one: no stage,
    no field, no journal row."""

    def step(ctx: StepContext) -> Outcome:
        if ctx.record["title"] == "job 1":
            with db.begin() as conn:  # re-issued under the step (P2)
                conn.execute(
                    update(jobs)
                    .where(jobs.c.id == ctx.claim.record_id)
                    .values(claim_token="e" * 32)
                )
        return Advance({"result": "ok"})

    domain = make_domain(new=step)
    a, b, c = add_jobs(db, 3, clock.now())
    with db.connect() as conn:
        assert Executor(db, clock, settings).run_batch(conn, domain, "default", limit=3) == 3
    rows = [job(db, i) for i in (a, b, c)]
    assert [(r["stage"], r["result"]) for r in rows] == [
        ("waiting", "ok"),
        ("new", None),
        ("waiting", "ok"),
    ]
    assert rows[1]["claim_token"] == "e" * 32
    with db.connect() as conn:
        journal = conn.execute(
            select(record_events.c.record_id, record_events.c.outcome)
            .where(record_events.c.domain == "jobs")
            .order_by(record_events.c.record_id)
        ).all()
    assert [tuple(r) for r in journal] == [(a, "advanced"), (c, "advanced")]


def test_d3_resume_of_a_stuck_record_restarts_its_countdown(
    db: Engine, clock: FakeClock, settings: PipelineSettings
) -> None:
    """Halted ``stuck``, then resumed: the next claim runs the step instead of finding the old
    countdown over the limit again (resume re-sets the time in stage, P9)."""
    outcomes: Iterator[Outcome] = iter([Fail("slow provider"), Advance({"result": "after resume"})])
    domain = make_domain(new=lambda ctx: next(outcomes))
    (jid,) = add_jobs(db, 1, clock.now())
    executor = Executor(db, clock, settings)
    assert executor.run_once(domain, "default")  # the first claim starts the countdown
    clock.advance(settings.own_work_limit + 1)
    assert executor.run_once(domain, "default")
    assert job(db, jid)["halt_reason"] == "stuck"
    resume(db, domain, jid, clock=clock)
    assert executor.run_once(domain, "default")
    row = job(db, jid)
    assert (row["stage"], row["result"], row["halted_at"]) == ("waiting", "after resume", None)
