"""Statements on ``worker_processes`` (who runs workers, where, what each holds) and
``lane_pauses`` (lanes no process claims for). Every time is the database's (D17)."""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from typing import Any

from sqlalchemy import (
    Connection,
    Double,
    RowMapping,
    Table,
    and_,
    bindparam,
    delete,
    insert,
    or_,
    select,
    update,
)
from sqlalchemy.sql import ColumnElement

from conveyor.clock import Clock
from conveyor.db.now import db_now
from conveyor.db.tables import lane_pauses, worker_processes

__all__ = [
    "LIVE_STATES",
    "beat",
    "held_records",
    "now_of",
    "pause_lane",
    "paused_lanes",
    "process_by_id",
    "processes",
    "register_process",
    "request_drain",
    "resume_lane",
    "select_now",
    "stop_process",
]

#: States of a process that should still be beating; one unseen for ``lost_after`` is lost.
LIVE_STATES = ("running", "draining")


def now_of(clock: Clock) -> ColumnElement[float]:
    """The database's clock, or a test clock's time when it drives database time (D17)."""
    if clock.drives_database_time:
        return bindparam("_now", type_=Double(), callable_=clock.now)
    return db_now()


def select_now(now: ColumnElement[float]) -> Any:
    """``SELECT now``: the time ``now`` stands for."""
    return select(now)


def register_process(
    conn: Connection,
    now: ColumnElement[float],
    *,
    host: str,
    pid: int,
    version: str,
    lanes: Mapping[str, int],
    holder: str | None = None,
) -> int:
    """Insert this process's row (``running``); returns its id. ``holder`` is the name its
    claims carry in the record tables' ``claimed_by``."""
    row = conn.execute(
        insert(worker_processes)
        .values(
            host=host,
            pid=pid,
            version=version,
            holder=holder,
            lanes=dict(lanes),
            busy={lane: 0 for lane in lanes},
            holding=[],
            started_at=now,
            last_seen_at=now,
            state="running",
        )
        .returning(worker_processes.c.id)
    ).scalar_one()
    return int(row)


def beat(
    conn: Connection,
    process_id: int,
    now: ColumnElement[float],
    *,
    busy: Mapping[str, int],
    holding: Sequence[tuple[str, int, str]],
) -> RowMapping | None:
    """Write the process's last-seen time, busy threads and held claims; returns its row after
    (None when the row is gone)."""
    conn.execute(
        update(worker_processes)
        .where(worker_processes.c.id == process_id)
        .values(last_seen_at=now, busy=dict(busy), holding=[list(h) for h in holding])
    )
    return process_by_id(conn, process_id)


def stop_process(conn: Connection, process_id: int, now: ColumnElement[float]) -> None:
    """Mark the process ``stopped`` (a clean exit): it holds nothing any more."""
    conn.execute(
        update(worker_processes)
        .where(worker_processes.c.id == process_id)
        .values(
            state="stopped",
            stopped_at=now,
            last_seen_at=now,
            holding=[],
        )
    )


def process_by_id(conn: Connection, process_id: int) -> RowMapping | None:
    """One process row by id, or None."""
    query = select(worker_processes).where(worker_processes.c.id == process_id)
    return conn.execute(query).mappings().first()


def processes(
    conn: Connection, now: ColumnElement[float], *, since: float | None = None
) -> tuple[float, list[RowMapping]]:
    """The database's time and the process rows, newest first: every live one (running or
    draining, seen or not) and, when ``since`` is given, those stopped after it."""
    at = float(conn.execute(select(now)).scalar_one())
    shown: ColumnElement[bool] = worker_processes.c.state.in_(LIVE_STATES)
    if since is not None:
        shown = or_(shown, worker_processes.c.stopped_at >= since)
    query = select(worker_processes).where(shown).order_by(worker_processes.c.id.desc())
    return at, list(conn.execute(query).mappings())


def request_drain(
    conn: Connection, now: ColumnElement[float], *, ids: Collection[int] = (), host: str = ""
) -> list[int]:
    """Ask the running processes ``ids`` (or every running one on ``host``) to drain; returns
    the ids asked."""
    who = worker_processes.c.id.in_(sorted(ids)) if ids else worker_processes.c.host == host
    query = (
        update(worker_processes)
        .where(and_(who, worker_processes.c.state == "running"))
        .values(state="draining", drain_requested_at=now)
        .returning(worker_processes.c.id)
    )
    return sorted(int(i) for i in conn.execute(query).scalars())


def paused_lanes(conn: Connection) -> dict[str, dict[str, Any]]:
    """Every paused lane → ``{"paused_at", "reason"}``."""
    rows = conn.execute(select(lane_pauses)).mappings()
    return {str(r["lane"]): {"paused_at": r["paused_at"], "reason": r["reason"]} for r in rows}


def pause_lane(conn: Connection, lane: str, now: ColumnElement[float], reason: str | None) -> bool:
    """Pause ``lane``; False when it was paused already (left as it was)."""
    if conn.execute(select(lane_pauses.c.lane).where(lane_pauses.c.lane == lane)).first():
        return False
    conn.execute(insert(lane_pauses).values(lane=lane, paused_at=now, reason=reason))
    return True


def resume_lane(conn: Connection, lane: str) -> bool:
    """Resume ``lane``; False when it was not paused."""
    return conn.execute(delete(lane_pauses).where(lane_pauses.c.lane == lane)).rowcount > 0


def held_records(conn: Connection, table: Table, tokens: Collection[str]) -> list[RowMapping]:
    """``id``, ``stage``, ``work_started_at`` and ``claim_token`` of the records of ``table``
    whose live claim is one of ``tokens``."""
    if not tokens:
        return []
    query = select(table.c.id, table.c.stage, table.c.work_started_at, table.c.claim_token).where(
        table.c.claim_token.in_(sorted(set(tokens)))
    )
    return list(conn.execute(query.order_by(table.c.id)).mappings())
