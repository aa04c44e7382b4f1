"""Worker processes the operator can see and steer, on both databases, with real threads: a
process registers, shows what it holds (record, stage, since) and how many threads are busy; a
paused lane is not claimed from the next poll on while running steps finish; a drain request
reaches the process within a poll; a silent process is shown as lost, a stopped one as
stopped."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from prometheus_client import REGISTRY
from sqlalchemy import Engine, select, update

from conveyor.clock import SystemClock
from conveyor.config import PipelineSettings
from conveyor.db.tables import worker_processes
from conveyor.pipeline import Advance, StepContext, WorkerPool
from conveyor.processes import (
    ProcessRegistry,
    drain,
    list_processes,
    pause,
    resume,
    show_process,
)
from conveyor.processes import queries as process_queries
from conveyor.processes.control import FORGET_LOST
from tests.support.jobs_domain import add_jobs, job, jobs, make_domain

TABLES = {"jobs": jobs}


def wait_for(condition: Callable[[], bool], what: str, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, what
        time.sleep(0.02)


def test_a_process_registers_shows_its_claims_obeys_pauses_and_drains(
    db: Engine, settings: PipelineSettings
) -> None:
    gate = threading.Event()

    def slow(ctx: StepContext) -> Advance:
        gate.wait(20)
        return Advance({"result": "ok"})

    clock = SystemClock()
    domain = make_domain(new=slow)
    pool = WorkerPool(db, [domain], {"default": 2}, clock=clock, settings=settings)
    registry = ProcessRegistry(
        db,
        clock,
        lanes=pool.lanes,
        version="9.9.9",
        poll_interval=0.05,
        beat_interval=0.1,
        busy=pool.busy,
        holding=pool.holding,
        host="host-a",
        holder=pool.holder,
    )
    pool.may_claim = registry.may_claim
    ids = add_jobs(db, 2, time.time())

    def views() -> list:  # type: ignore[type-arg]
        return list_processes(db, clock, lost_after=30, stopped_within=None, tables=TABLES)

    registry.start()
    pool.start()
    try:
        wait_for(lambda: len(views()[0].holding) == 2, "the process never showed its claims")
        [view] = views()
        assert (view.host, view.version, view.state) == ("host-a", "9.9.9", "running")
        assert view.lanes == {"default": 2} and view.busy == {"default": 2}
        assert sorted(h.record_id for h in view.holding) == ids
        assert {h.stage for h in view.holding} == {"new"}
        # Every claim names its holder, and the process row says which holder it is.
        with db.connect() as conn:
            holders = conn.execute(select(jobs.c.claimed_by).where(jobs.c.id.in_(ids))).scalars()
            assert set(holders) == {pool.holder}
            recorded = select(worker_processes.c.holder).where(worker_processes.c.id == view.id)
            assert conn.execute(recorded).scalar_one() == pool.holder
        assert all(h.since is not None for h in view.holding)
        # The same, per process, as Prometheus gauges.
        assert REGISTRY.get_sample_value("conveyor_lane_workers", {"lane": "default"}) == 2
        assert REGISTRY.get_sample_value("conveyor_lane_busy", {"lane": "default"}) == 2
        assert REGISTRY.get_sample_value("conveyor_lane_paused", {"lane": "default"}) == 0
        # Paused cluster-wide: the running steps finish, nothing more is claimed.
        assert pause(db, clock, "default", known={"default"}, reason="provider outage")
        wait_for(lambda: "default" in registry.paused, "the pause never reached the process")
        assert REGISTRY.get_sample_value("conveyor_lane_paused", {"lane": "default"}) == 1
        gate.set()
        wait_for(lambda: all(job(db, i)["stage"] == "waiting" for i in ids), "steps finished")
        time.sleep(10 * settings.poll_interval)
        assert [job(db, i)["stage"] for i in ids] == ["waiting", "waiting"]
        assert resume(db, "default", known={"default"})
        wait_for(lambda: all(job(db, i)["stage"] == "done" for i in ids), "resumed lane ran")
        wait_for(lambda: views()[0].busy == {"default": 0}, "busy count back to 0")
        # Drain: asked by host name, seen within a poll; no claim afterwards.
        assert drain(db, clock, "host-a") == [registry.id]
        assert registry.drain.wait(5), "the drain request never reached the process"
        assert not registry.may_claim("default")
        assert REGISTRY.get_sample_value("conveyor_process_draining") == 1
        late = add_jobs(db, 1, time.time())
        time.sleep(10 * settings.poll_interval)
        assert job(db, late[0])["stage"] == "new"
        assert views()[0].state == "draining"
    finally:
        gate.set()
        pool.stop()
        registry.stop()
    assert views() == []
    [stopped] = list_processes(db, clock, lost_after=30, stopped_within=60, tables=TABLES)
    assert stopped.state == "stopped" and stopped.holding == []


def test_a_silent_process_is_shown_lost(db: Engine) -> None:
    clock = SystemClock()
    with db.begin() as conn:
        process_queries.register_process(
            conn,
            process_queries.now_of(clock),
            host="host-b",
            pid=4242,
            version="9.9.9",
            lanes={"audio": 2},
        )
    [fresh] = list_processes(db, clock, lost_after=0.5)
    assert fresh.state == "running"
    time.sleep(0.7)  # no beat: the process was killed
    [silent] = list_processes(db, clock, lost_after=0.5)
    assert silent.state == "lost" and silent.seen_ago >= 0.5
    with db.connect() as conn:
        assert conn.execute(select(worker_processes.c.state)).scalar() == "running"
    # Lost a day ago and more: history, no longer listed, still found by id.
    with db.begin() as conn:
        conn.execute(
            update(worker_processes).values(
                last_seen_at=worker_processes.c.last_seen_at - FORGET_LOST - 1
            )
        )
    assert list_processes(db, clock, lost_after=0.5) == []
    assert show_process(db, clock, silent.id, lost_after=0.5).state == "lost"
