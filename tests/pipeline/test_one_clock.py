"""D17: every time that decides who may act is the database's, never a worker's clock.

Workers here run on the database's real clock (``SystemClock``/``OffsetClock`` do not drive
database time); ``OffsetClock`` is a worker host whose own clock is minutes off. The last tests
step the database's clock itself (a ``FakeClock`` standing in for it).
"""

from __future__ import annotations

import time

from sqlalchemy import Engine

from conveyor.clock import SystemClock
from conveyor.config import PipelineSettings
from conveyor.pipeline import Advance, Executor, Fail, StepContext
from conveyor.pipeline.outcomes import Outcome
from conveyor.testing import FakeClock, OffsetClock
from tests.support.jobs_domain import add_jobs, job, make_domain

FIVE_MINUTES = 300.0


def test_d17_a_worker_ahead_neither_steals_a_live_claim_nor_skips_a_retry_pause(
    db: Engine, settings: PipelineSettings
) -> None:
    domain = make_domain(new=lambda ctx: Fail("not yet"), new_lease=60)
    held, paused = add_jobs(db, 2, time.time())
    right = Executor(db, SystemClock(), settings)
    ahead = Executor(db, OffsetClock(+FIVE_MINUTES), settings)
    claim = right.claim(domain, "default")
    assert claim is not None and claim.record_id == held
    assert right.run_once(domain, "default")  # `paused` fails: a pause of 1-2 s
    assert job(db, paused)["attempts"] == 1
    # Five minutes ahead, both the lease and the pause look over to the worker; they are not.
    assert ahead.claim(domain, "default") is None
    assert job(db, held)["claim_token"] == claim.token


def test_d17_a_worker_behind_writes_leases_and_heartbeats_from_the_database_clock(
    db: Engine, settings: PipelineSettings
) -> None:
    seen: dict[str, float] = {}

    def beats(ctx: StepContext) -> Outcome:
        seen["claimed"] = job(db, ctx.claim.record_id)["claim_expires_at"] - time.time()
        ctx.heartbeat()
        seen["beat"] = job(db, ctx.claim.record_id)["claim_expires_at"] - time.time()
        assert Executor(db, SystemClock(), settings).claim(domain, "default") is None
        return Advance()

    domain = make_domain(new=beats, new_lease=60)
    add_jobs(db, 1, time.time())
    behind = Executor(db, OffsetClock(-FIVE_MINUTES), settings)
    assert behind.run_once(domain, "default")
    # Not born expired (it would be 240 s in the past on the worker's clock).
    assert 50 < seen["claimed"] <= 61 and 50 < seen["beat"] <= 61


def test_d17_a_worker_ahead_does_not_see_a_fresh_record_as_stuck(
    db: Engine, settings: PipelineSettings
) -> None:
    calls: list[int] = []

    def step(ctx: StepContext) -> Outcome:
        calls.append(ctx.claim.record_id)
        return Fail("once") if len(calls) == 1 else Advance()

    domain = make_domain(new=step)
    (jid,) = add_jobs(db, 1, time.time())
    tight = settings.model_copy(update={"own_work_limit": 120.0, "retry_base": 0.02})
    assert Executor(db, SystemClock(), tight).run_once(domain, "default")  # countdown starts
    time.sleep(0.1)  # the retry pause (at most 20 ms) is over on every clock
    assert Executor(db, OffsetClock(+FIVE_MINUTES), tight).run_once(domain, "default")
    row = job(db, jid)
    assert row["halted_at"] is None and row["stage"] == "waiting" and len(calls) == 2


def test_d17_database_clock_stepped_back_an_hour_freezes_nothing(
    db: Engine, clock: FakeClock, settings: PipelineSettings
) -> None:
    domain = make_domain(new=lambda ctx: Fail("again"), new_lease=60)
    paused, abandoned = add_jobs(db, 2, clock.now())
    executor = Executor(db, clock, settings)
    assert executor.run_once(domain, "default")  # `paused` fails: pause of 1-2 s
    assert executor.claim(domain, "default") is not None  # `abandoned`: its worker dies
    clock.advance(-3600)
    got = {c.record_id for c in (executor.claim(domain, "default") for _ in range(3)) if c}
    assert got == {paused, abandoned}  # claimable at once, not in an hour


def test_d17_database_clock_stepped_forward_an_hour_ages_no_waiting_record(
    db: Engine, clock: FakeClock, settings: PipelineSettings
) -> None:
    domain = make_domain()
    ids = add_jobs(db, 3, clock.now())
    executor = Executor(db, clock, settings.model_copy(update={"own_work_limit": 600.0}))
    clock.advance(3600)
    while executor.run_once(domain, "default"):
        pass
    assert [job(db, i)["stage"] for i in ids] == ["done"] * 3
