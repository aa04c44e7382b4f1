"""Revision 0007 (worker processes, lane pauses) upgrades a database made by 0006 with records in
every stage; it only adds tables, so what an older worker reads and writes is unchanged."""

from __future__ import annotations

from sqlalchemy import Engine, insert, select

from conveyor.db.migrate import current_revision, upgrade
from conveyor.db.tables import lane_pauses, worker_processes
from tests.support.old_database import NOW, assert_kept, fill_for_alice


def test_0007_keeps_every_record_and_adds_processes_and_pauses(old_engine: Engine) -> None:
    with old_engine.begin() as conn:
        before = fill_for_alice(conn)
    upgrade(old_engine)
    assert (current_revision(old_engine) or "") >= "0007"
    assert_kept(old_engine, before)
    with old_engine.connect() as conn:
        assert conn.execute(select(worker_processes)).all() == []
        assert conn.execute(select(lane_pauses)).all() == []
    with old_engine.begin() as conn:
        conn.execute(insert(lane_pauses).values(lane="audio", paused_at=NOW, reason=None))
        conn.execute(
            insert(worker_processes).values(
                host="h",
                pid=1,
                version="x",
                lanes={"audio": 2},
                busy={"audio": 0},
                holding=[["audio", 1, "t"]],
                started_at=NOW,
                last_seen_at=NOW,
                state="running",
            )
        )
        held = conn.execute(select(worker_processes.c.holding)).scalar_one()
    assert held == [["audio", 1, "t"]]
