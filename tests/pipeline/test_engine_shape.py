"""The engine under real step times: producer, executors, completer, rescuer (D18, D19).

Each test runs a real :class:`WorkerPool` (real threads, the real clock unless said) on SQLite
and PostgreSQL; steps are held at events, never timed by sleeps, so what is asserted is the
order of things, not a speed.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import replace
from typing import Any

import pytest
from sqlalchemy import Engine, select, update

from conveyor.clock import SystemClock
from conveyor.config import PipelineSettings
from conveyor.db.tables import record_events
from conveyor.pipeline import Advance, Domain, Executor, StepContext, WorkerPool, producer, queries
from conveyor.pipeline.halts import EngineHalt
from conveyor.pipeline.outcomes import Halt, Outcome
from conveyor.pipeline.producer import LaneClaims, claim_jobs
from conveyor.pipeline.rescuer import WORKER_LOST, rescue
from conveyor.testing import FakeClock
from tests.support.jobs_domain import add_jobs, job, jobs, make_domain

WAIT = 30.0  # seconds any event may take on a loaded machine before the test gives up


def real_settings(**changes: Any) -> PipelineSettings:
    base: dict[str, Any] = {
        "own_work_limit": 3600,
        "foreign_work_limit": 86400,
        "max_attempts": 3,
        "retry_base": 0.2,
        "retry_max": 1.0,
        "poll_interval": 0.1,
        "stop_grace": 5.0,
    }
    return PipelineSettings(**{**base, **changes})


@contextmanager
def running(
    db: Engine, domain: Domain, workers: int, settings: PipelineSettings, grace: float = 5.0
) -> Iterator[WorkerPool]:
    pool = WorkerPool(db, [domain], {"default": workers}, clock=SystemClock(), settings=settings)
    pool.start()
    try:
        yield pool
    finally:
        pool.stop(grace)


def wait_until(predicate: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + WAIT
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.01)


def stages(db: Engine, ids: list[int]) -> list[str]:
    return [job(db, i)["stage"] for i in ids]


def events(db: Engine, record_id: int) -> list[tuple[str, str | None]]:
    with db.connect() as conn:
        rows = conn.execute(
            select(record_events.c.outcome, record_events.c.outcome_text)
            .where(record_events.c.domain == "jobs", record_events.c.record_id == record_id)
            .order_by(record_events.c.id)
        ).all()
    return [(str(r[0]), r[1]) for r in rows]


def claimed(db: Engine) -> int:
    with db.connect() as conn:
        return len(conn.execute(select(jobs.c.id).where(jobs.c.claim_token.is_not(None))).all())


def only_new(step: Callable[[StepContext], Outcome]) -> Domain:
    """The jobs domain whose ``new`` step is ``step`` and whose ``waiting`` stage no worker
    of these tests serves (it runs in another lane)."""
    return make_domain(step, waiting_lane="elsewhere")


def test_a_small_backlog_is_spread_over_every_idle_executor(db: Engine) -> None:
    """Eight records, four idle executors: four steps run at once (one worker taking all eight
    in turn would never bring four to the barrier)."""
    together = threading.Barrier(4, timeout=WAIT)
    threads: set[str] = set()

    def step(ctx: StepContext) -> Outcome:
        threads.add(threading.current_thread().name)
        if ctx.record["title"] in {f"job {i}" for i in range(4)}:
            together.wait()
        return Advance()

    ids = add_jobs(db, 8, time.time())
    with running(db, only_new(step), 4, real_settings()):
        wait_until(lambda: stages(db, ids) == ["waiting"] * 8, "every record saved")
    assert len(threads) == 4


def test_heartbeat_stages_are_claimed_one_per_executor(db: Engine) -> None:
    gate = threading.Event()
    entered: list[int] = []

    def step(ctx: StepContext) -> Outcome:
        entered.append(ctx.claim.record_id)
        assert gate.wait(WAIT)
        return Advance()

    domain = make_domain(step, waiting_lane="elsewhere", heartbeat=True)
    ids = add_jobs(db, 10, time.time())
    with running(db, domain, 2, real_settings()):
        wait_until(lambda: len(entered) == 2, "two steps running")
        time.sleep(0.3)  # several polls: the producer claims nothing while both are busy
        assert claimed(db) == 2
        gate.set()
        wait_until(lambda: stages(db, ids) == ["waiting"] * 10, "every record saved")


def test_finished_results_are_saved_at_once_not_behind_a_long_step(db: Engine) -> None:
    """One step is held; the others finish and are saved while it still runs."""
    gate = threading.Event()

    def step(ctx: StepContext) -> Outcome:
        if ctx.record["title"] == "job 0":
            assert gate.wait(WAIT)
        return Advance()

    domain = make_domain(step, waiting_lane="elsewhere", heartbeat=True)
    slow, *fast = add_jobs(db, 4, time.time())
    with running(db, domain, 4, real_settings()):
        wait_until(lambda: stages(db, fast) == ["waiting"] * 3, "the fast records saved")
        assert job(db, slow)["stage"] == "new" and job(db, slow)["claim_token"] is not None
        gate.set()
        wait_until(lambda: job(db, slow)["stage"] == "waiting", "the slow record saved")


def test_saves_do_not_wait_while_a_halted_step_s_leftovers_meet_a_store_that_hangs(
    db: Engine,
) -> None:
    """A halted step's stored leftovers are removed off the completer: while the store hangs
    on that removal, the lane's next outcome is saved all the same."""
    store_answers, removing = threading.Event(), threading.Event()
    removed: list[list[str]] = []

    def discard(_engine: Engine, keys: Sequence[str]) -> None:
        removing.set()
        assert store_answers.wait(WAIT)  # a store that does not answer
        removed.append(list(keys))

    def step(ctx: StepContext) -> Outcome:
        if ctx.record["title"] == "job 0":
            ctx.produced_object("jobs/0/thumb")
            return Halt(EngineHalt.STEP_ERROR, "bad input")
        assert removing.wait(WAIT)  # the other's leftovers are being removed now
        return Advance()

    domain = replace(make_domain(step, waiting_lane="elsewhere"), discard=discard)
    halted, saved = add_jobs(db, 2, time.time())
    with running(db, domain, 2, real_settings()):
        try:
            wait_until(lambda: job(db, saved)["stage"] == "waiting", "the other outcome saved")
            assert not removed, "saved while the removal still hangs"
        finally:
            store_answers.set()
        wait_until(lambda: bool(removed), "the leftovers removed")
    assert removed == [["jobs/0/thumb"]]
    assert job(db, halted)["halt_reason"] == "step_error"


def test_leases_do_not_lapse_under_work_that_fits_them(db: Engine) -> None:
    """Every step takes half its 2 s lease; each record runs exactly once (no claim waits in
    memory with its lease running), and no worker is taken for lost."""
    runs: Counter[int] = Counter()
    lock = threading.Lock()

    def step(ctx: StepContext) -> Outcome:
        with lock:
            runs[ctx.claim.record_id] += 1
        threading.Event().wait(1.0)  # the work itself: half the lease
        return Advance()

    domain = make_domain(step, waiting_lane="elsewhere", new_lease=2.0)
    ids = add_jobs(db, 6, time.time())
    with running(db, domain, 2, real_settings(prefetch=1)):
        wait_until(lambda: stages(db, ids) == ["waiting"] * 6, "every record saved")
    assert runs == dict.fromkeys(ids, 1)
    assert all(events(db, i) == [("advanced", "new → waiting")] for i in ids)


def test_stop_saves_finished_outcomes_releases_unstarted_claims_and_lets_steps_finish(
    db: Engine,
) -> None:
    gate = threading.Event()
    entered = threading.Event()

    def step(ctx: StepContext) -> Outcome:
        if ctx.record["title"] == "job 0":
            entered.set()
            assert gate.wait(WAIT)
        return Advance()

    domain = make_domain(step, waiting_lane="elsewhere")
    ids = add_jobs(db, 12, time.time())
    pool = WorkerPool(
        db, [domain], {"default": 2}, clock=SystemClock(), settings=real_settings(prefetch=3)
    )
    pool.start()
    assert entered.wait(WAIT)
    # The other executor works through the rest while job 0 is held; stop mid-way.
    wait_until(lambda: stages(db, ids).count("waiting") >= 3, "some records saved")
    stopper = threading.Thread(target=pool.stop, args=(WAIT,))
    stopper.start()
    wait_until(lambda: claimed(db) <= 1, "unstarted claims released at once")
    gate.set()  # the running step finishes within the grace and is saved
    stopper.join(WAIT)
    assert not stopper.is_alive()
    rows = [job(db, i) for i in ids]
    assert rows[0]["stage"] == "waiting"
    assert all(r["claim_token"] is None and r["step_started_at"] is None for r in rows)
    for r in rows:
        # Every step that ran was saved once; none ran twice.
        expected = [("advanced", "new → waiting")] if r["stage"] == "waiting" else []
        assert events(db, r["id"]) == expected


def test_claims_released_on_stop_wake_another_pool_at_once(
    db: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A pool stops holding a prefetched record, a step that sees the stop, and a step that
    outlives the grace: each claim, once released, is taken by another pool at once, not at
    that pool's next poll (a minute here) or when a prefetch hold would have lapsed."""
    monkeypatch.setattr(producer, "PREFETCH_HOLD", 60.0)  # only a wake-up can bring B in time
    gate = threading.Event()
    entered: set[str] = set()

    def held(ctx: StepContext) -> Outcome:
        entered.add(str(ctx.record["title"]))
        if ctx.record["title"] == "job 0":
            assert gate.wait(WAIT)  # outlives the grace
        else:
            while True:  # sees the stop and gives its claim back
                ctx.check()
                gate.wait(0.01)
        return Advance()

    ran: list[int] = []

    def other(ctx: StepContext) -> Outcome:
        ran.append(ctx.claim.record_id)
        return Advance()

    ids = add_jobs(db, 3, time.time())
    a = WorkerPool(
        db,
        [only_new(held)],
        {"default": 2},
        clock=SystemClock(),
        settings=real_settings(prefetch=1),
    )
    b = WorkerPool(
        db,
        [only_new(other)],
        {"default": 3},
        clock=SystemClock(),
        settings=real_settings(poll_interval=60.0),
    )
    a.start()
    try:
        wait_until(
            lambda: entered == {"job 0", "job 1"} and claimed(db) == 3, "two steps, a prefetch"
        )
        b.start()
        stopper = threading.Thread(target=a.stop, args=(0.5,))
        stopper.start()
        wait_until(lambda: sorted(ran) == ids, "the released records run in the other pool")
        assert not gate.is_set()  # job 0's first step is still running in the stopped pool
        stopper.join(WAIT)
    finally:
        gate.set()
        a.stop(0)
        b.stop()
    assert stages(db, ids) == ["waiting"] * 3
    assert all(events(db, i) == [("advanced", "new → waiting")] for i in ids)


def test_d18_a_lapsed_claim_on_a_started_step_is_a_failed_attempt_then_exhausts(
    db: Engine, clock: FakeClock, settings: PipelineSettings
) -> None:
    """A worker that dies (or hangs) inside a step leaves a started claim; when it lapses the
    rescuer counts a failed attempt "worker lost" with the usual pause, and at the attempts
    limit the record halts ``attempts_exhausted`` with that reason, not ``stuck``."""
    domain = make_domain(new_lease=10)
    (jid,) = add_jobs(db, 1, clock.now())
    now = queries.now_of(clock)
    lane = LaneClaims(domain, "default", now)
    for attempt in range(1, settings.max_attempts + 1):
        with db.connect() as conn:
            (lost,) = claim_jobs(conn, lane, 1)  # its worker dies right after: nothing saved
        assert job(db, jid)["step_started_at"] is not None
        assert rescue(db, domain, settings, now) == 0  # its lease still runs
        clock.advance(11)
        assert Executor(db, clock, settings).claim(domain, "default") is None  # not before D18
        assert rescue(db, domain, settings, now) == 1
        assert rescue(db, domain, settings, now) == 0  # counted once
        row = job(db, jid)
        assert row["claim_token"] is None and row["step_started_at"] is None
        if attempt < settings.max_attempts:
            assert row["attempts"] == attempt and row["halted_at"] is None
            assert events(db, jid)[-1] == ("failed", WORKER_LOST)
            pause = row["retry_at"] - clock.now()
            ceiling = settings.retry_base * 2 ** (attempt - 1)
            assert ceiling / 2 <= pause <= ceiling  # the usual retry pause
            clock.advance(pause)
    row = job(db, jid)
    assert row["halt_reason"] == "attempts_exhausted"
    assert row["halt_error"] == f"failed {settings.max_attempts} times; last error: worker lost"
    assert lost.claim.record_id == jid


def test_d18_a_claim_that_lapses_before_its_step_started_counts_nothing(
    db: Engine, clock: FakeClock, settings: PipelineSettings
) -> None:
    domain = make_domain(new_lease=10)
    (jid,) = add_jobs(db, 1, clock.now())
    lane = LaneClaims(domain, "default", queries.now_of(clock))
    with db.connect() as conn:
        (prefetched,) = claim_jobs(conn, lane, 1, started=False)  # then its process dies
    row = job(db, jid)
    assert row["step_started_at"] is None
    assert row["claim_expires_at"] - clock.now() < 10  # a short hold, not the lease
    clock.advance(row["claim_expires_at"] - clock.now())
    assert rescue(db, domain, settings, queries.now_of(clock)) == 0
    again = Executor(db, clock, settings).claim(domain, "default")
    assert again is not None and again.record_id == jid and again != prefetched.claim
    assert job(db, jid)["attempts"] == 0 and events(db, jid) == []


def test_d18_a_prefetched_claim_starts_with_the_full_lease_or_not_at_all(
    db: Engine, clock: FakeClock, settings: PipelineSettings
) -> None:
    ran: list[int] = []

    def step(ctx: StepContext) -> Outcome:
        ran.append(ctx.claim.record_id)
        assert job(db, ctx.claim.record_id)["claim_expires_at"] == pytest.approx(clock.now() + 10)
        return Advance()

    domain = make_domain(step, new_lease=10)
    taken, kept = add_jobs(db, 2, clock.now())
    lane = LaneClaims(domain, "default", queries.now_of(clock))
    with db.connect() as conn:
        first, second = claim_jobs(conn, lane, 2, started=False)
    clock.advance(5)  # both holds lapse; another worker takes the first of the two meanwhile
    other = Executor(db, clock, settings).claim(domain, "default")
    assert other is not None and other.record_id == taken
    executor = Executor(db, clock, settings)
    done = [executor.execute(first), executor.execute(second)]
    assert ran == [kept]  # the one still ours started (full lease); the other never ran
    assert done[0] is None and done[1] is not None
    assert job(db, taken)["attempts"] == 0


def test_d19_a_rescued_record_is_taken_before_records_not_started(
    db: Engine, clock: FakeClock, settings: PipelineSettings
) -> None:
    """Newest first (as media), with newer uploads arriving: the oldest record, rescued from
    a lost worker, is still taken first."""
    domain = make_domain(new_lease=10, order_by=[jobs.c.sort_value.desc(), jobs.c.id.desc()])
    (rescued,) = add_jobs(db, 1, clock.now(), sort=lambda i: 0.0)
    now = queries.now_of(clock)
    with db.connect() as conn:
        claim_jobs(conn, LaneClaims(domain, "default", now), 1)  # its worker dies
    newer = add_jobs(db, 5, clock.now(), sort=lambda i: 10.0 + i)
    clock.advance(11)
    assert rescue(db, domain, settings, now) == 1
    clock.advance(settings.retry_max)
    newest = add_jobs(db, 3, clock.now(), sort=lambda i: 100.0 + i)
    executor = Executor(db, clock, settings)
    got = [c.record_id for c in iter(lambda: executor.claim(domain, "default"), None)]
    # Rescued first; then the stage's own order (newest first), the id breaking ties.
    assert got == [rescued, *reversed(newest), *reversed(newer)]


def test_d19_among_begun_records_the_stage_order_still_holds(
    db: Engine, clock: FakeClock, settings: PipelineSettings
) -> None:
    domain = make_domain(new_lease=10)
    ids = add_jobs(db, 4, clock.now(), sort=lambda i: float(4 - i))
    begun = [ids[0], ids[2]]
    with db.begin() as conn:
        conn.execute(update(jobs).where(jobs.c.id.in_(begun)).values(work_started_at=0.0))
    executor = Executor(db, clock, settings)
    got = [c.record_id for c in iter(lambda: executor.claim(domain, "default"), None)]
    assert got == [ids[2], ids[0], ids[3], ids[1]]


def test_d3_a_step_that_hangs_under_its_heartbeat_is_halted_stuck_past_the_limit(
    db: Engine, clock: FakeClock, settings: PipelineSettings
) -> None:
    """A heartbeat keeps a hung step's lease alive, so D18 never counts it and the claim-time
    stuck check never sees it; the rescuer halts it ``stuck`` once its work in the stage has
    outlasted the stage's limit, fencing the running step out (P6)."""
    domain = make_domain(new_lease=30, heartbeat=True)
    (jid,) = add_jobs(db, 1, clock.now())
    now = queries.now_of(clock)
    with db.connect() as conn:
        (running_job,) = claim_jobs(conn, LaneClaims(domain, "default", now), 1)
    claim = running_job.claim
    # Its heartbeat beats every 10 s for the whole limit: the lease never lapses.
    while clock.now() - job(db, jid)["work_started_at"] < settings.own_work_limit - 10:
        clock.advance(10)
        with db.begin() as conn:
            assert queries.extend_claim(conn, domain, claim, now, 30)
        assert rescue(db, domain, settings, now) == 0, "halted before its limit"
    clock.advance(20)
    with db.begin() as conn:
        assert queries.extend_claim(conn, domain, claim, now, 30)
    assert rescue(db, domain, settings, now) == 1
    assert rescue(db, domain, settings, now) == 0  # halted once
    row = job(db, jid)
    assert row["halt_reason"] == EngineHalt.STUCK.value and row["attempts"] == 0
    assert row["claim_token"] is None
    assert "its step still running" in row["halt_error"]
    assert events(db, jid)[-1][0] == "halted"
    # The step's heartbeat now finds its claim gone, and what it returns is refused.
    with db.begin() as conn:
        assert not queries.extend_claim(conn, domain, claim, now, 30)
        assert not queries.save_if_held(conn, domain, claim, {"result": "late"})
    assert job(db, jid)["result"] is None


def test_d3_a_hung_step_in_a_running_pool_is_halted_stuck_and_told_its_claim_is_lost(
    db: Engine,
) -> None:
    """The same in a running pool on the real clock: a step held at an event under its
    heartbeat is halted ``stuck`` by the pool's own rescuer after the (short) limit; the step
    sees its claim lost; the record's other work goes on."""
    release = threading.Event()
    saw_lost = threading.Event()

    def hangs(ctx: StepContext) -> Outcome:
        if ctx.record["title"] != "job 0":
            return Advance()
        release.wait(WAIT)
        if ctx.lost.is_set():
            saw_lost.set()
        return Advance()

    domain = make_domain(new=hangs, new_lease=0.6, heartbeat=True)
    ids = add_jobs(db, 3, time.time())
    settings = real_settings(own_work_limit=1.5, poll_interval=0.05)
    with running(db, domain, 2, settings):
        wait_until(lambda: job(db, ids[0])["halted_at"] is not None, "the hung step's halt")
        wait_until(lambda: stages(db, ids[1:]) == ["done", "done"], "the other records")
        row = job(db, ids[0])
        assert row["halt_reason"] == "stuck" and row["stage"] == "new", row
        # Its heartbeat learns the claim is gone within a beat.
        time.sleep(0.5)
        release.set()
        wait_until(saw_lost.is_set, "the step to see its claim lost")
    row = job(db, ids[0])
    assert row["halt_reason"] == "stuck" and row["stage"] == "new"  # its Advance refused
