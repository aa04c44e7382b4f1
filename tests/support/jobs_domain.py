"""A minimal domain for engine tests: table ``test_jobs`` with stages new → waiting → done."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from sqlalchemy import (
    Column,
    ColumnElement,
    Double,
    Engine,
    Integer,
    MetaData,
    String,
    Table,
    Text,
    insert,
    select,
    text,
)

from conveyor.db.outage import Outage
from conveyor.db.tables import queue_columns, record_events
from conveyor.halts import Guide, HaltReason
from conveyor.pipeline import Domain, Stage, StepContext
from conveyor.pipeline.outcomes import Advance, Outcome

test_metadata = MetaData()

jobs = Table(
    "test_jobs",
    test_metadata,
    Column("id", Integer, primary_key=True),
    Column("owner", String(50), nullable=False),
    Column("title", String(100), nullable=True),
    Column("sort_value", Double, nullable=False),
    Column("result", Text, nullable=True),
    Column("waited", Integer, nullable=True),
    *queue_columns(),
)

effects = Table(
    "test_effects",
    test_metadata,
    Column("id", Integer, primary_key=True),
    Column("job_id", Integer, nullable=False),
    Column("stage", String(32), nullable=False),
    Column("token", String(32), nullable=False),
)

StepFn = Callable[[StepContext], Outcome]


def _guide(meaning: str, resume_helps: bool = True) -> Guide:
    return Guide(meaning=meaning, resume_helps=resume_helps, action="resume", words=meaning)


class JobHalt(HaltReason):
    """The test domain's halt reasons (a domain declares its own, :mod:`conveyor.halts`)."""

    BAD_INPUT = "bad_input", _guide("the job's input is bad", resume_helps=False)
    NOPE = "nope", _guide("the step refuses")
    NOT_AUDIO = "not_audio", _guide("the upload is text", resume_helps=False)
    X = "x", _guide("a halt")
    PROVIDER = "provider", _guide("the provider refused")


def default_step(ctx: StepContext) -> Outcome:
    return Advance({"result": f"{ctx.stage.name} ok"})


def make_domain(
    new: StepFn = default_step,
    waiting: StepFn = default_step,
    *,
    new_lease: float = 60.0,
    waiting_lease: float = 30.0,
    new_lane: str = "default",
    waiting_lane: str = "default",
    heartbeat: bool = False,
    order_by: Sequence[ColumnElement[Any]] | None = None,
    outages: Sequence[Outage] = (),
) -> Domain:
    """The test domain with the given steps (callables looked up at call time)."""
    return Domain(
        name="jobs",
        table=jobs,
        stages=[
            Stage("new", new, lane=new_lane, work="own", lease=new_lease, heartbeat=heartbeat),
            Stage("waiting", waiting, lane=waiting_lane, work="foreign", lease=waiting_lease),
            Stage("done"),
        ],
        order_by=[jobs.c.sort_value] if order_by is None else order_by,
        owned_fields=frozenset({"result", "waited"}),
        outages=outages,
    )


def create_tables(engine: Engine) -> None:
    if engine.dialect.name == "postgresql":
        with engine.begin() as conn:
            conn.execute(text("DROP TABLE IF EXISTS test_jobs, test_effects"))
    test_metadata.create_all(engine)


def add_jobs(
    engine: Engine, count: int, now: float, *, sort: Callable[[int], float] = float, **extra: Any
) -> list[int]:
    """Insert ``count`` jobs at stage ``new``; returns their ids in insertion order."""
    rows = [
        {
            "owner": "ann",
            "title": f"job {i}",
            "sort_value": sort(i),
            "stage": "new",
            "state_entered_at": now,
            "attempts": 0,
            "updated_at": now,
            **extra,
        }
        for i in range(count)
    ]
    with engine.begin() as conn:
        conn.execute(insert(jobs), rows)
        ids = conn.execute(select(jobs.c.id).order_by(jobs.c.id)).scalars().all()
    return list(ids)[-count:]


def job(engine: Engine, job_id: int) -> dict[str, Any]:
    with engine.connect() as conn:
        row = conn.execute(select(jobs).where(jobs.c.id == job_id)).mappings().one()
    return dict(row)


def events_of(db: Engine, record_id: int) -> list[dict[str, Any]]:
    """The journal rows of job ``record_id``, oldest first."""
    with db.connect() as conn:
        rows = conn.execute(
            select(record_events)
            .where(record_events.c.domain == "jobs", record_events.c.record_id == record_id)
            .order_by(record_events.c.id)
        ).mappings()
        return [dict(r) for r in rows]
