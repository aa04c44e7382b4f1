"""D3: backlog is shown (records waiting, oldest age per domain and stage), never halted."""

from __future__ import annotations

from prometheus_client import REGISTRY
from sqlalchemy import Engine, update

from conveyor.config import PipelineSettings
from conveyor.pipeline import Executor
from conveyor.pipeline.metrics import BACKLOG, backlog_of
from conveyor.testing import FakeClock
from tests.support.jobs_domain import add_jobs, jobs, make_domain


def test_d3_backlog_counts_waiting_records_and_the_oldest_age_per_stage(
    db: Engine, clock: FakeClock, settings: PipelineSettings
) -> None:
    domain = make_domain()
    held, _waiting, halted = add_jobs(db, 3, clock.now())
    clock.advance(50)
    add_jobs(db, 1, clock.now(), stage="waiting")
    with db.begin() as conn:
        conn.execute(update(jobs).where(jobs.c.id == halted).values(halted_at=clock.now()))
    executor = Executor(db, clock, settings)
    claim = executor.claim(domain, "default")
    assert claim is not None and claim.record_id == held  # held by a step: not waiting
    clock.advance(50)
    rows = backlog_of(db, [domain], clock)
    assert rows == [("jobs", "new", 1, 100.0), ("jobs", "waiting", 1, 50.0)]

    BACKLOG.watch(db, [domain], clock)
    try:
        assert (
            REGISTRY.get_sample_value(
                "conveyor_backlog_records", {"domain": "jobs", "stage": "new", "scope": "cluster"}
            )
            == 1
        )
        assert (
            REGISTRY.get_sample_value(
                "conveyor_backlog_oldest_seconds",
                {"domain": "jobs", "stage": "waiting", "scope": "cluster"},
            )
            == 50.0
        )
    finally:
        BACKLOG.forget()
