"""Lanes served by different processes: a hand-off wakes the next lane's process at once.

PostgreSQL: the save that moves a record into another lane's stage sends one NOTIFY in its own
transaction, however many records the batch handed on (coalesced), and every worker process
LISTENs. Two real ``conveyor worker`` processes — one serving ``short``, one ``long`` — with a
60 s poll interval: a video's playback (``long``) starts within seconds of its poster
(``short``), which only the notification can explain.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from sqlalchemy import Engine, func, select

from conveyor.clock import SystemClock
from conveyor.config import PipelineSettings
from conveyor.db.engine import make_engine
from conveyor.db.migrate import upgrade
from conveyor.db.notify import CHANNEL
from conveyor.db.tables import media_items, record_events
from conveyor.media.albums import create_album
from conveyor.media.intake import accept_media
from conveyor.objects import LocalStore
from conveyor.pipeline.executor import Executor
from tests.support.cluster import ThrowawayCluster
from tests.support.jobs_domain import add_jobs, create_tables, jobs, make_domain
from tests.support.needs import MEDIA_CORPUS

CONVEYOR = str(Path(sys.executable).with_name("conveyor"))
POLL = 60.0


@pytest.fixture
def database(cluster: ThrowawayCluster, request: pytest.FixtureRequest) -> Iterator[str]:
    """A fresh, migrated database on the suite's own cluster; its URL."""
    url = cluster.create_database(f"lanes_{request.node.name[:40]}")
    engine = make_engine(url)
    upgrade(engine)
    engine.dispose()
    yield url


def _worker(lanes: str, url: str, root: Path, log: Path) -> subprocess.Popen[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CONVEYOR_")} | {
        "CONVEYOR_DATABASE__URL": url,
        "CONVEYOR_STORAGE__ROOT": str(root),
        "CONVEYOR_PIPELINE__POLL_INTERVAL": str(POLL),
        "CONVEYOR_MEDIA__SHORT_WORKERS": "1",
        "CONVEYOR_MEDIA__LONG_WORKERS": "1",
    }
    proc = subprocess.Popen(
        [CONVEYOR, "worker", "--lanes", lanes],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        cwd=root.parent,
    )
    assert proc.stderr is not None
    seen = ""
    while line := proc.stderr.readline():
        seen += line
        if "worker pool started" in line:
            log.write_text(seen)
            return proc
    raise AssertionError(f"worker --lanes {lanes} never started:\n{seen}")


def _stop(proc: subprocess.Popen[str]) -> None:
    proc.send_signal(signal.SIGTERM)
    proc.communicate(timeout=60)


def test_a_video_handed_from_the_short_process_to_the_long_process_is_taken_at_once(
    database: str, tmp_path: Path
) -> None:
    root = tmp_path / "storage"
    long_proc = _worker("long", database, root, tmp_path / "long.log")
    short_proc: subprocess.Popen[str] | None = None
    engine = make_engine(database)
    try:
        time.sleep(1.0)  # the long worker found nothing and now sleeps its 60 s poll
        short_proc = _worker("short", database, root, tmp_path / "short.log")
        clock = SystemClock()
        album = create_album(engine, clock, owner="ann", name="handoff")
        item = accept_media(
            engine,
            LocalStore(root),
            clock,
            MEDIA_CORPUS / "file-type__fixture.mov",
            album_id=album,
            owner="ann",
            max_pixels=100_000_000,
            keep_duplicate=True,
        )
        started = time.monotonic()
        while time.monotonic() - started < POLL * 0.75:
            with engine.connect() as conn:
                row = conn.execute(select(media_items).where(media_items.c.id == item)).one()
            if row.stage == "done" or row.halted_at is not None:
                break
            time.sleep(0.05)
        assert row.stage == "done", dict(row._mapping)
        with engine.connect() as conn:
            handed = conn.execute(
                select(record_events.c.created_at).where(
                    record_events.c.domain == "media",
                    record_events.c.record_id == item,
                    record_events.c.stage == "uploaded",
                    record_events.c.outcome == "advanced",
                )
            ).scalar_one()
        # Both times are the database's: from the poster's save to the playback's save.
        assert row.state_entered_at - handed < 15.0, row.state_entered_at - handed
    finally:
        engine.dispose()
        if short_proc is not None:
            _stop(short_proc)
        _stop(long_proc)


def test_one_notification_per_saving_transaction_however_many_records_it_hands_on(
    database: str,
) -> None:
    engine: Engine = make_engine(database)
    create_tables(engine)
    domain = make_domain(new_lane="short", waiting_lane="long")
    add_jobs(engine, 20, time.time())
    listener = psycopg.connect(database, autocommit=True)
    try:
        listener.execute(f"LISTEN {CHANNEL}")
        executor = Executor(engine, SystemClock(), PipelineSettings())
        with engine.connect() as conn:
            moved = executor.run_batch(conn, domain, "short", limit=20)
        assert moved == 20
        with engine.connect() as conn:
            waiting = conn.execute(
                select(func.count()).select_from(jobs).where(jobs.c.stage == "waiting")
            ).scalar_one()
        assert waiting == 20  # twenty hand-offs, saved in one transaction
        heard = list(listener.notifies(timeout=2.0))
        assert len(heard) == 1, heard
    finally:
        listener.close()
        engine.dispose()
