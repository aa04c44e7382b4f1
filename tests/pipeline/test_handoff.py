"""A hand-off between lanes served by different processes wakes the receiving one at once.

PostgreSQL only: the outcome that moves a record into another lane's stage notifies in its own
transaction (LISTEN/NOTIFY). Two pools with their own notifiers stand for two processes; the
receiving one polls only every 60 s, so only the notification can make it quick.
"""

from __future__ import annotations

import time

from sqlalchemy import Engine

from conveyor.config import PipelineSettings
from conveyor.db.notify import Notifier
from conveyor.pipeline import WorkerPool
from conveyor.testing import FakeClock
from tests.support.jobs_domain import add_jobs, create_tables, job, make_domain


def test_hand_off_to_a_lane_of_another_process_wakes_it_at_once(pg_engine: Engine) -> None:
    create_tables(pg_engine)
    clock = FakeClock()
    domain = make_domain(new_lane="short", waiting_lane="long")
    settings = PipelineSettings(poll_interval=60.0, stop_grace=5.0)
    receiver = WorkerPool(
        pg_engine,
        [domain],
        {"long": 1},
        clock=clock,
        settings=settings,
        notifier=Notifier(pg_engine),
    )
    sender = WorkerPool(
        pg_engine,
        [domain],
        {"short": 1},
        clock=clock,
        settings=settings,
        notifier=Notifier(pg_engine),
    )
    receiver.start()
    try:
        time.sleep(1.0)  # the receiver found nothing and sleeps its 60 s poll
        (jid,) = add_jobs(pg_engine, 1, clock.now())
        sender.start()
        started = time.monotonic()
        while job(pg_engine, jid)["stage"] != "done" and time.monotonic() - started < 30:
            time.sleep(0.05)
        assert job(pg_engine, jid)["stage"] == "done"
        assert time.monotonic() - started < 15  # far sooner than the 60 s poll
    finally:
        sender.stop()
        receiver.stop()
