"""Concurrency stress: 8 workers x 2,000 records, random failures and random claim expiries.

Every record must end ``done`` or halted with a reason; none lost; no write lands for a stale
token: each (record, stage) has exactly one effect row, written by the claim that advanced it.
"""

from __future__ import annotations

import random
import threading
import time

from prometheus_client import REGISTRY
from sqlalchemy import Connection, Engine, func, insert, select, update

from conveyor.clock import SystemClock
from conveyor.config import PipelineSettings
from conveyor.db.tables import record_events
from conveyor.pipeline import Advance, Fail, StepContext, WorkerPool
from conveyor.pipeline.outcomes import Outcome
from tests.support.jobs_domain import add_jobs, effects, jobs, make_domain

RECORDS = 2000
WORKERS = 8


def lost_total() -> float:
    total = 0.0
    for stage in ("new", "waiting"):
        total += (
            REGISTRY.get_sample_value(
                "conveyor_claims_lost_total", {"domain": "jobs", "stage": stage}
            )
            or 0.0
        )
    return total


def test_stress_8_workers_2000_records_random_failures_and_expiries(db: Engine) -> None:
    rng = random.Random(20261129)
    rng_lock = threading.Lock()
    expired = {"count": 0}

    def roll() -> float:
        with rng_lock:
            return rng.random()

    def step(ctx: StepContext) -> Outcome:
        dice = roll()
        if dice < 0.10:
            return Fail("random failure")
        if dice < 0.15:
            # The claim expires under the step (as if it ran past its lease); another worker
            # may take the record before this step tries to save.
            with db.begin() as conn:
                conn.execute(
                    update(jobs)
                    .where(jobs.c.id == ctx.claim.record_id, jobs.c.claim_token == ctx.claim.token)
                    .values(claim_expires_at=0.0)
                )
            with rng_lock:
                expired["count"] += 1
            time.sleep(0.005)

        def effect(conn: Connection) -> None:
            conn.execute(
                insert(effects).values(
                    job_id=ctx.claim.record_id, stage=ctx.stage.name, token=ctx.claim.token
                )
            )

        return Advance({"result": ctx.stage.name}, writes=effect)

    domain = make_domain(new=step, waiting=step)
    ids = add_jobs(db, RECORDS, time.time())
    settings = PipelineSettings(
        max_attempts=3, retry_base=0.01, retry_max=0.05, poll_interval=0.02, stop_grace=10
    )
    lost_before = lost_total()
    pool = WorkerPool(db, [domain], {"default": WORKERS}, clock=SystemClock(), settings=settings)
    pool.start()
    deadline = time.monotonic() + 600
    try:
        while time.monotonic() < deadline:
            with db.connect() as conn:
                open_ = conn.execute(
                    select(func.count())
                    .select_from(jobs)
                    .where(jobs.c.stage != "done", jobs.c.halted_at.is_(None))
                ).scalar_one()
            if open_ == 0:
                break
            time.sleep(0.2)
    finally:
        pool.stop()

    with db.connect() as conn:
        rows = conn.execute(select(jobs)).mappings().all()
        effect_rows = conn.execute(select(effects)).mappings().all()
        advanced = conn.execute(
            select(func.count())
            .select_from(record_events)
            .where(record_events.c.domain == "jobs", record_events.c.outcome == "advanced")
        ).scalar_one()
    assert len(rows) == RECORDS and {r["id"] for r in rows} == set(ids)  # none lost
    for row in rows:
        assert row["stage"] == "done" or (
            row["halted_at"] is not None and row["halt_reason"] == "attempts_exhausted"
        ), dict(row)
    done = sum(1 for r in rows if r["stage"] == "done")
    assert done > RECORDS * 0.9
    # Exactly one effect per (record, stage) that was left by an advance: no stale write landed.
    keys = [(e["job_id"], e["stage"]) for e in effect_rows]
    assert len(keys) == len(set(keys)) == advanced
    per_record = {r["id"]: r for r in rows}
    for job_id, stage in keys:
        row = per_record[job_id]
        assert stage == "new" or row["stage"] == "done"
    lost = lost_total() - lost_before
    assert expired["count"] > 50
    assert lost > 0  # some expired claims were taken over and their stale results refused
    print(f"claims expired: {expired['count']}, stale results refused: {lost:.0f}")
