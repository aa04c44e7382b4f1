"""The producer checks out a connection for each look for work and holds none while it waits, as
the completer does per batch: a connection held idle through a database restart would fail the
first claim after the outage had ended, and be reported as an outage of its own."""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable

import pytest
from sqlalchemy import Engine, text
from sqlalchemy.engine import make_url
from sqlalchemy.pool import QueuePool

from conveyor.clock import SystemClock
from conveyor.config import PipelineSettings
from conveyor.db import outage
from conveyor.db.engine import make_engine
from conveyor.pipeline import Advance, StepContext, WorkerPool
from conveyor.pipeline.outcomes import Outcome
from tests.support.jobs_domain import add_jobs, create_tables, job, make_domain
from tests.support.tcp_proxy import TcpProxy

PG_URL = os.environ.get("CONVEYOR_TEST_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/test")
WAIT = 60.0


def wait_until(predicate: Callable[[], bool], what: str, timeout: float = WAIT) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.01)


def checked_out(engine: Engine) -> int:
    """Connections of the engine's pool in use now (every pool the engine makes is a QueuePool)."""
    pool = engine.pool
    assert isinstance(pool, QueuePool)
    return pool.checkedout()


def settings() -> PipelineSettings:
    return PipelineSettings(poll_interval=0.05, stop_grace=5.0)


def test_an_idle_producer_holds_no_connection(db: Engine) -> None:
    """With its one executor busy and with no work at all, the lane's producer holds no
    connection: at some moment every connection of the pool is checked in (the rescuer and the
    completer check theirs out only for a moment)."""
    gate = threading.Event()
    started = threading.Event()

    def step(ctx: StepContext) -> Outcome:
        started.set()
        gate.wait(WAIT)
        return Advance()

    pool = WorkerPool(
        db, [make_domain(step)], {"default": 1}, clock=SystemClock(), settings=settings()
    )
    (record,) = add_jobs(db, 1, time.time())
    pool.start()
    try:
        assert started.wait(WAIT)
        # The producer waits for its executor: it must not hold a connection meanwhile.
        wait_until(lambda: checked_out(db) == 0, "no connection checked out (busy lane)")
        gate.set()
        wait_until(lambda: job(db, record)["stage"] != "new", "the record to advance")
        # And with no work left, between its polls.
        wait_until(lambda: checked_out(db) == 0, "no connection checked out (idle lane)")
    finally:
        gate.set()
        pool.stop()


def test_a_producer_waiting_through_a_database_restart_claims_at_once_after_it(
    pg_engine: Engine, pg_proxy: TcpProxy, caplog: pytest.LogCaptureFixture
) -> None:
    """PostgreSQL (an embedded SQLite file has no server to restart): every connection drops
    while the lane's only executor runs a step; once the database answers again, the next
    record is claimed at once, and no outage is reported after the one that ended."""
    create_tables(pg_engine)
    with pg_engine.begin() as conn:
        conn.execute(text("TRUNCATE test_jobs, record_events RESTART IDENTITY"))
    url = make_url(PG_URL).set(host="127.0.0.1", port=pg_proxy.port)
    engine = make_engine(url.render_as_string(hide_password=False), pool_size=5)
    gate = threading.Event()
    started = threading.Event()
    held: list[int] = []

    def step(ctx: StepContext) -> Outcome:
        if ctx.claim.record_id in held:
            started.set()
            gate.wait(WAIT)
        return Advance()

    pool = WorkerPool(
        engine, [make_domain(step)], {"default": 1}, clock=SystemClock(), settings=settings()
    )
    (first,) = add_jobs(pg_engine, 1, time.time())
    held.append(first)
    pool.start()
    try:
        assert started.wait(WAIT)
        pg_proxy.cut()  # as a restart: every open connection is gone, new ones are accepted

        def answers() -> bool:
            # A statement that meets a dropped connection makes the pool drop the others.
            try:
                with engine.connect() as conn:
                    conn.execute(text("SELECT 1"))
            except Exception:
                return False
            return True

        wait_until(answers, "the database to answer again")
        wait_until(lambda: pool.notifier.connections >= 2, "the listener to reconnect")
        outage.DATABASE.reset()  # the restart's own outage is over
        caplog.clear()
        caplog.set_level(logging.INFO, logger="conveyor")
        (second,) = add_jobs(pg_engine, 1, time.time())
        gate.set()
        wait_until(lambda: job(pg_engine, first)["stage"] != "new", "the first record")
        wait_until(lambda: job(pg_engine, second)["stage"] != "new", "the next claim")
        told = [r.getMessage() for r in caplog.records if r.name.startswith("conveyor")]
        assert not [m for m in told if "unreachable" in m], told
        assert not outage.DATABASE.down
    finally:
        gate.set()
        pool.stop()
        engine.dispose()
