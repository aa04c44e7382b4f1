"""What operators see and do across the cluster: the worker processes (live, draining, lost,
recently stopped) and what each holds; lane pauses; drain requests. Used by ``conveyor
workers``/``conveyor lanes``, the admin API and the web operator page alike."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import Engine, RowMapping, Table

from conveyor.clock import Clock, iso_utc, seconds
from conveyor.db.ids import WORKER
from conveyor.db.tables import audio_records, media_items
from conveyor.error_codes import ErrorCode
from conveyor.errors import NotFound, RejectedInput, check_text
from conveyor.limits import LANE_REASON
from conveyor.processes import queries

__all__ = [
    "FORGET_LOST",
    "TABLES",
    "HeldRecord",
    "LaneState",
    "ProcessView",
    "drain",
    "lane_states",
    "list_processes",
    "pause",
    "resume",
    "show_process",
]

#: Seconds after which a lost process (killed, never stopped cleanly) is no longer listed; its
#: row stays (``conveyor workers show ID`` finds it).
FORGET_LOST = 86400.0

#: The record table of each domain a claim can name (tests pass their own domain's).
TABLES: Mapping[str, Table] = {"audio": audio_records, "media": media_items}


@dataclass(frozen=True)
class HeldRecord:
    """A record a process holds a claim on: its domain, id, stage and since when it has been
    worked in that stage (epoch seconds, the database's clock; None when not known)."""

    domain: str
    record_id: int
    stage: str | None
    since: float | None


@dataclass(frozen=True)
class ProcessView:
    """One worker process as an operator sees it.

    Attributes:
        state: ``running``, ``draining``, ``stopped`` or ``lost`` (running or draining but
            unseen for ``lost_after`` seconds: killed, frozen or cut off).
        lanes: lane → worker threads; busy: lane → threads running a step at the last beat.
        seen_ago: seconds since its last beat, by the database's clock.
        holding: the claims it held at its last beat that are still its own.
    """

    id: int
    host: str
    pid: int
    version: str
    state: str
    lanes: dict[str, int]
    busy: dict[str, int]
    started_at: float
    last_seen_at: float
    seen_ago: float
    drain_requested_at: float | None
    stopped_at: float | None
    holding: list[HeldRecord] = field(default_factory=list)

    def as_json(self) -> dict[str, Any]:
        """The view as JSON-able values (times ISO 8601 UTC, durations seconds)."""
        return {
            "id": self.id,
            "host": self.host,
            "pid": self.pid,
            "version": self.version,
            "state": self.state,
            "lanes": self.lanes,
            "busy": self.busy,
            "started_at": iso_utc(self.started_at),
            "last_seen_at": iso_utc(self.last_seen_at),
            "seen_ago": seconds(self.seen_ago),
            "drain_requested_at": iso_utc(self.drain_requested_at),
            "stopped_at": iso_utc(self.stopped_at),
            "holding": [
                {"domain": h.domain, "id": h.record_id, "stage": h.stage, "since": iso_utc(h.since)}
                for h in self.holding
            ],
        }


@dataclass(frozen=True)
class LaneState:
    """A lane across the cluster: paused (since when, why), worker threads and busy ones in the
    live processes."""

    lane: str
    paused_at: float | None
    reason: str | None
    workers: int
    busy: int


def _state(row: RowMapping, at: float, lost_after: float) -> str:
    state = str(row["state"])
    if state in queries.LIVE_STATES and at - float(row["last_seen_at"]) > lost_after:
        return "lost"
    return state


def _views(
    engine: Engine,
    at: float,
    rows: list[RowMapping],
    lost_after: float,
    tables: Mapping[str, Table],
) -> list[ProcessView]:
    tokens: dict[str, list[str]] = {}
    for row in rows:
        for domain, _record, token in row["holding"] or []:
            tokens.setdefault(str(domain), []).append(str(token))
    held: dict[str, RowMapping] = {}
    with engine.connect() as conn:
        for domain, wanted in tokens.items():
            table = tables.get(domain)
            if table is not None:
                for found in queries.held_records(conn, table, wanted):
                    held[str(found["claim_token"])] = found
    views = []
    for row in rows:
        holding = []
        for domain, record_id, token in row["holding"] or []:
            rec = held.get(str(token))
            if rec is not None:  # a claim given back since the beat is not held any more
                holding.append(
                    HeldRecord(
                        str(domain), int(record_id), str(rec["stage"]), rec["work_started_at"]
                    )
                )
        views.append(
            ProcessView(
                id=int(row["id"]),
                host=str(row["host"]),
                pid=int(row["pid"]),
                version=str(row["version"]),
                state=_state(row, at, lost_after),
                lanes={str(k): int(v) for k, v in dict(row["lanes"]).items()},
                busy={str(k): int(v) for k, v in dict(row["busy"]).items()},
                started_at=float(row["started_at"]),
                last_seen_at=float(row["last_seen_at"]),
                seen_ago=max(0.0, at - float(row["last_seen_at"])),
                drain_requested_at=row["drain_requested_at"],
                stopped_at=row["stopped_at"],
                holding=holding,
            )
        )
    return views


def list_processes(
    engine: Engine,
    clock: Clock,
    *,
    lost_after: float,
    stopped_within: float | None = 3600.0,
    tables: Mapping[str, Table] = TABLES,
) -> list[ProcessView]:
    """Every live process (running, draining, or lost within the last :data:`FORGET_LOST`
    seconds) and those stopped within ``stopped_within`` seconds (None: none), newest first."""
    now = queries.now_of(clock)
    with engine.connect() as conn:
        at = float(conn.execute(queries.select_now(now)).scalar_one())
        since = None if stopped_within is None else at - stopped_within
        _, rows = queries.processes(conn, now, since=since)
    # A host killed and replaced months ago is history, not an operator's concern today.
    rows = [r for r in rows if at - float(r["last_seen_at"]) <= FORGET_LOST]
    return _views(engine, at, rows, lost_after, tables)


def show_process(
    engine: Engine,
    clock: Clock,
    process_id: int,
    *,
    lost_after: float,
    tables: Mapping[str, Table] = TABLES,
) -> ProcessView:
    """One process by id, stopped or not.

    Raises:
        NotFound: no process ``process_id``.
    """
    now = queries.now_of(clock)
    with engine.connect() as conn:
        at = float(conn.execute(queries.select_now(now)).scalar_one())
        row = queries.process_by_id(conn, process_id)
    if row is None:
        raise NotFound(f"worker process {process_id} does not exist")
    return _views(engine, at, [row], lost_after, tables)[0]


def drain(engine: Engine, clock: Clock, target: str) -> list[int]:
    """Ask a process (``target`` an id) or every running process of a host (``target`` a host
    name) to drain: it stops claiming, lets its running steps finish and exits 0.

    Returns:
        The ids asked (already draining or stopped ones are left out).

    Raises:
        NotFound: no running process has that id or runs on that host.
    """
    target = target.strip()
    with engine.begin() as conn:
        if target.isascii() and target.isdigit():
            process_id = WORKER.parse(target)  # None: a number no process can have
            ids = [] if process_id is None else [process_id]
            asked = queries.request_drain(conn, queries.now_of(clock), ids=ids) if ids else []
        else:
            asked = queries.request_drain(conn, queries.now_of(clock), host=target)
    if not asked:
        raise NotFound(f"no running worker process has the id or host {target!r}")
    return asked


def _check_lane(lane: str, known: set[str]) -> str:
    lane = lane.strip()
    if lane not in known:
        raise RejectedInput(
            ErrorCode.UNKNOWN_LANE,
            f"unknown lane {lane!r}; the lanes are {', '.join(sorted(known))}",
        )
    return lane


def pause(engine: Engine, clock: Clock, lane: str, *, known: set[str], reason: str | None) -> bool:
    """Pause ``lane`` cluster-wide: no process claims for it from its next poll on; running
    steps finish. Returns False when it was paused already.

    Raises:
        RejectedInput: ``unknown_lane``; ``invalid_request`` for a ``reason`` that
            :data:`conveyor.limits.LANE_REASON` refuses (every entry point comes here, so none
            can store what the others refuse).
    """
    lane = _check_lane(lane, known)
    check_text(LANE_REASON, reason)
    with engine.begin() as conn:
        return queries.pause_lane(conn, lane, queries.now_of(clock), reason)


def resume(engine: Engine, lane: str, *, known: set[str]) -> bool:
    """Resume ``lane``; False when it was not paused.

    Raises:
        RejectedInput: ``unknown_lane``.
    """
    lane = _check_lane(lane, known)
    with engine.begin() as conn:
        return queries.resume_lane(conn, lane)


def lane_states(
    engine: Engine, clock: Clock, *, known: list[str], lost_after: float
) -> list[LaneState]:
    """Every lane of ``known``: paused or not, worker threads and busy ones in live processes
    (lost ones not counted)."""
    with engine.connect() as conn:
        paused = queries.paused_lanes(conn)
    live = [
        p
        for p in list_processes(engine, clock, lost_after=lost_after, stopped_within=None)
        if p.state in queries.LIVE_STATES
    ]
    return [
        LaneState(
            lane=lane,
            paused_at=paused.get(lane, {}).get("paused_at"),
            reason=paused.get(lane, {}).get("reason"),
            workers=sum(p.lanes.get(lane, 0) for p in live),
            busy=sum(p.busy.get(lane, 0) for p in live),
        )
        for lane in known
    ]
