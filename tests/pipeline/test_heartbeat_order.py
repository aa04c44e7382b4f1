"""M8 with P6/P9: a long step's heartbeat outlives its claim, never the other way round.

The executor gives a claim back (on a graceful stop: released; at a step's end: its outcome
saved) while the step's heartbeat thread is still running, and stops the heartbeat only after
that commit: the lease cannot lapse between the step's end and its save, and a beat that races
the release finds the claim gone and reports the loss instead of extending a claim nobody will
save. Real worker and heartbeat threads on both databases; the order is observed at each
commit of the worker's connection.

The database's time is a :class:`~conveyor.testing.FakeClock` that never moves: the heartbeat
still beats every ``LEASE / 3`` seconds of real time, but no lease can lapse however late a
loaded machine runs a beat. On the real clock a beat held up past the 0.3 s lease let the
rescuer count the step's worker lost (D18, rightly) and the step ran again, which added a
give-back of its own to the ones this file observes.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from sqlalchemy import Engine, event, func, select

from conveyor.config import PipelineSettings
from conveyor.db.tables import record_events
from conveyor.pipeline import Advance, StepContext, WorkerPool
from conveyor.pipeline.outcomes import Outcome
from conveyor.testing import FakeClock
from tests.support.jobs_domain import add_jobs, job
from tests.support.jobs_domain import make_domain as jobs_domain

# A short lease: the heartbeat beats every 0.1 s (of real time; the lease runs on the fake
# database clock, which stands still).
LEASE = 0.3
HEARTBEAT = "conveyor-heartbeat"


class Commits:
    """At every commit of a worker's transaction that gave a claim back (a guarded ``UPDATE``
    of the jobs that sets ``claim_token``, not the claim itself), whether a heartbeat thread was
    alive; and how many heartbeats were written."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self.heartbeat_alive_at_give_back: list[bool] = []
        self.beats = 0
        self._lock = threading.Lock()

    def after_execute(self, conn: Any, _cursor: Any, statement: str, *_rest: Any) -> None:
        text = " ".join(statement.split())
        if not text.startswith("UPDATE test_jobs SET") or "RETURNING" in text:
            return
        if threading.current_thread().name == HEARTBEAT:
            with self._lock:
                self.beats += 1
        elif "claim_token" in text.split(" WHERE ")[0]:
            conn.info["gives_back"] = True

    def commit(self, conn: Any) -> None:
        if conn.info.pop("gives_back", False):
            alive = any(t.name == HEARTBEAT and t.is_alive() for t in threading.enumerate())
            with self._lock:
                self.heartbeat_alive_at_give_back.append(alive)

    def rollback(self, conn: Any) -> None:
        conn.info.pop("gives_back", None)


@pytest.fixture
def commits(db: Engine) -> Iterator[Commits]:
    seen = Commits(db)
    event.listen(db, "after_cursor_execute", seen.after_execute)
    event.listen(db, "commit", seen.commit)
    event.listen(db, "rollback", seen.rollback)
    yield seen
    event.remove(db, "after_cursor_execute", seen.after_execute)
    event.remove(db, "commit", seen.commit)
    event.remove(db, "rollback", seen.rollback)


def until(predicate: Callable[[], bool], what: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.01)


def run_pool(
    db: Engine, settings: PipelineSettings, step: Callable[[StepContext], Outcome]
) -> tuple[WorkerPool, int]:
    domain = jobs_domain(new=step, new_lease=LEASE, heartbeat=True)
    clock = FakeClock(time.time())
    (jid,) = add_jobs(db, 1, clock.now())
    pool = WorkerPool(db, [domain], {"default": 1}, clock=clock, settings=settings)
    pool.start()
    return pool, jid


def events_of(db: Engine, jid: int) -> list[str]:
    with db.connect() as conn:
        return [
            str(o)
            for o in conn.execute(
                select(record_events.c.outcome).where(
                    record_events.c.domain == "jobs", record_events.c.record_id == jid
                )
            ).scalars()
        ]


def test_m8_graceful_stop_releases_the_claim_before_the_heartbeat_stops(
    db: Engine, settings: PipelineSettings, commits: Commits
) -> None:
    def long_step(ctx: StepContext) -> Outcome:
        while True:  # a long step that looks at the stop flag between chunks of work
            ctx.check()
            time.sleep(0.01)

    pool, jid = run_pool(db, settings, long_step)
    try:
        until(lambda: commits.beats >= 2, "two heartbeats")
    finally:
        pool.stop(grace=30)
    pool.join()
    # Released once, by the worker, while the heartbeat still ran.
    assert commits.heartbeat_alive_at_give_back == [True]
    row = job(db, jid)
    assert (row["stage"], row["claim_token"], row["claim_expires_at"]) == ("new", None, None)
    assert row["halted_at"] is None and events_of(db, jid) == []
    assert not any(t.name == HEARTBEAT for t in threading.enumerate())


def test_m8_a_step_s_outcome_is_saved_before_its_heartbeat_stops(
    db: Engine, settings: PipelineSettings, commits: Commits
) -> None:
    def long_step(ctx: StepContext) -> Outcome:
        until(lambda: commits.beats >= 2, "two heartbeats")
        return Advance({"result": "long done"})

    pool, jid = run_pool(db, settings, long_step)
    try:
        until(lambda: job(db, jid)["stage"] == "done", "the job to finish")
    finally:
        pool.stop(grace=30)
    pool.join()
    # Each step ran once (no lease lapsed, nothing was rescued or repeated) ...
    assert events_of(db, jid) == ["advanced", "advanced"]
    assert job(db, jid)["result"] == "waiting ok"
    # ... and the first give-back is the save of `new`'s outcome, with the heartbeat running;
    # `waiting` has no heartbeat.
    assert commits.heartbeat_alive_at_give_back == [True, False]


def test_m8_a_claim_released_after_the_grace_is_reported_lost_by_the_last_heartbeat(
    db: Engine, settings: PipelineSettings, commits: Commits
) -> None:
    seen: dict[str, StepContext] = {}
    entered = threading.Event()

    def stubborn_step(ctx: StepContext) -> Outcome:
        seen["ctx"] = ctx
        entered.set()
        # Ignores the stop for longer than the grace, then finishes as if nothing happened.
        until(lambda: ctx.lost.is_set(), "the heartbeat to find the claim gone")
        return Advance({"result": "too late"})

    pool, jid = run_pool(db, settings, stubborn_step)
    try:
        assert entered.wait(30)
    finally:
        pool.stop(grace=0.2)  # the pool releases the claim the step still works under
    pool.join()
    assert seen["ctx"].lost.is_set()
    row = job(db, jid)
    # Nothing of the late outcome was written; the record is claimable at once.
    assert (row["stage"], row["result"], row["claim_token"]) == ("new", None, None)
    assert events_of(db, jid) == []
    with db.connect() as conn:
        assert conn.execute(select(func.count()).select_from(record_events)).scalar_one() == 0
