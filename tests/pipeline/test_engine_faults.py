"""The engine when a worker process dies (SIGKILL) or a wake-up's connection drops, with real
processes, on SQLite and PostgreSQL (D18; only started work waits for a lease)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import partial
from pathlib import Path

from sqlalchemy import Engine, select, text

from conveyor.clock import SystemClock
from conveyor.config import PipelineSettings
from conveyor.db.notify import Notifier
from conveyor.pipeline import Advance, StepContext, WorkerPool
from conveyor.pipeline.outcomes import Outcome
from conveyor.pipeline.rescuer import WORKER_LOST
from tests.support.jobs_domain import add_jobs, job, jobs, make_domain

WORKER = Path(__file__).resolve().parents[1] / "support" / "killable_worker.py"
WAIT = 60.0


def wait_until(predicate: Callable[[], bool], what: str, timeout: float = WAIT) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.02)


def url_of(db: Engine) -> str:
    return db.url.render_as_string(hide_password=False)


@contextmanager
def worker(db: Engine, mode: str) -> Iterator[subprocess.Popen[bytes]]:
    proc = subprocess.Popen([sys.executable, str(WORKER), url_of(db), mode])
    try:
        yield proc
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait()


def claims(db: Engine) -> tuple[list[int], list[int]]:
    """(records claimed without a started step, records whose step started)."""
    with db.connect() as conn:
        rows = conn.execute(
            select(jobs.c.id, jobs.c.step_started_at).where(jobs.c.claim_token.is_not(None))
        ).all()
    return [r[0] for r in rows if r[1] is None], [r[0] for r in rows if r[1] is not None]


def test_d18_a_killed_workers_unstarted_records_run_elsewhere_at_once_started_ones_wait(
    db: Engine,
) -> None:
    """A process holding one started step and two prefetched records is killed: the two run
    elsewhere about a second later; the started one keeps its 30 s lease."""
    ids = add_jobs(db, 3, time.time())
    with worker(db, "hang") as proc:
        wait_until(lambda: tuple(map(len, claims(db))) == (2, 1), "a start and two prefetches")
        unstarted, started = claims(db)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
    killed = time.monotonic()
    ran: dict[int, float] = {}

    def step(ctx: StepContext) -> Outcome:
        ran[ctx.claim.record_id] = time.monotonic() - killed
        return Advance()

    settings = PipelineSettings(poll_interval=2.0, stop_grace=5.0)
    pool = WorkerPool(
        db,
        [make_domain(step, waiting_lane="elsewhere", new_lease=30.0)],
        {"default": 2},
        clock=SystemClock(),
        settings=settings,
    )
    pool.start()
    try:
        wait_until(lambda: set(ran) >= set(unstarted), "the unstarted records run", 20)
    finally:
        pool.stop()
    assert set(ran) == set(unstarted)  # the started one waits for its lease (D18)
    assert job(db, started[0])["claim_token"] is not None
    assert sorted(ids) == sorted([*unstarted, *started])
    # Picked up at their hold's end (about 1 s), not at the next poll or the lease.
    assert max(ran.values()) < 30.0


def test_d18_a_record_that_kills_its_worker_halts_attempts_exhausted(db: Engine) -> None:
    """Each try kills the worker process inside the step; a surviving pool's rescuer counts
    each lapse as "worker lost"; at the attempts limit (2 here) the record halts."""
    (jid,) = add_jobs(db, 1, time.time())
    settings = PipelineSettings(poll_interval=0.1, max_attempts=2, retry_base=0.2, retry_max=0.4)
    survivor = WorkerPool(
        db,
        [make_domain(waiting_lane="elsewhere", new_lease=1.0)],
        {"other": 1},  # serves no stage of the record: only its rescuer matters
        clock=SystemClock(),
        settings=settings,
    )
    survivor.start()
    try:
        for attempt in (1, 2):
            with worker(db, "crash") as proc:
                assert proc.wait(WAIT) == -signal.SIGKILL
            wait_until(partial(counted, db, jid, attempt), "the lost worker counted (D18)")
    finally:
        survivor.stop()
    row = job(db, jid)
    assert row["halt_reason"] == "attempts_exhausted"
    assert row["halt_error"] == f"failed 2 times; last error: {WORKER_LOST}"


def counted(db: Engine, jid: int, attempts: int) -> bool:
    row = job(db, jid)
    return bool(row["attempts"] >= attempts or row["halted_at"] is not None)


def test_after_the_listener_reconnects_the_pool_looks_for_work_at_once(
    pg_engine: Engine,
) -> None:
    """PostgreSQL: a wake-up sent while the listener's connection is down is lost; once the
    listener is back, its process looks for work at once instead of a poll later."""
    notifier = Notifier(pg_engine)
    notifier.start_listening()
    try:
        wait_until(lambda: notifier.connections == 1, "the listener connected")
        since = notifier.generation
        woke = threading.Event()
        waiter = threading.Thread(target=lambda: woke.set() if notifier.wait(since, 60) else None)
        waiter.start()
        with pg_engine.begin() as conn:
            conn.execute(
                text(
                    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                    "WHERE query LIKE 'LISTEN %' AND pid <> pg_backend_pid()"
                    " AND datname = current_database()"
                )
            )
        waiter.join(WAIT)
        assert woke.is_set()
        assert notifier.connections == 2
    finally:
        notifier.close()
