"""The engine's SQL statements, by name (SQLAlchemy Core; policy lives in lifecycle/executor).

Every write that acts on behalf of a claim is conditional on ``claim_token = :token`` and
reports whether it matched (P6). None of these statements touches owner fields (P7).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from sqlalchemy import Connection, RowMapping, case, insert, literal, or_, select, update

from conveyor.db.tables import record_events
from conveyor.pipeline.claims import Claim
from conveyor.pipeline.stages import Domain, Stage

__all__ = [
    "claim_one",
    "extend_claim",
    "insert_event",
    "read_record",
    "release_claim",
    "resume_halted",
    "save_if_held",
    "touch_if_held",
]


def claim_one(
    conn: Connection, domain: Domain, stages: Sequence[Stage], now: float, token: str
) -> Claim | None:
    """Claim the first eligible record in ``stages``, in ONE statement (P1, P3-P5).

    Eligible: in one of ``stages``, not halted, past its retry pause, and unclaimed or with an
    expired claim. Order: the domain's sort value, then the primary key. The lease is computed
    from the record's own stage at claim time (P4). PostgreSQL skips rows another claimer has
    locked; SQLite serialises writers (``BEGIN IMMEDIATE``), so the clause is dropped there.

    Returns:
        The claim, or None when there is no work now (P12).
    """
    table = domain.table
    names = [s.name for s in stages]
    eligible = (
        select(table.c.id)
        .where(
            table.c.stage.in_(names),
            table.c.halted_at.is_(None),
            or_(table.c.retry_at.is_(None), table.c.retry_at <= now),
            or_(table.c.claim_token.is_(None), table.c.claim_expires_at <= now),
        )
        .order_by(*domain.order_by, table.c.id)
        .limit(1)
        .with_for_update(skip_locked=True)
        .scalar_subquery()
    )
    lease = case(
        {s.name: literal(now + s.lease) for s in stages}, value=table.c.stage, else_=literal(now)
    )
    stmt = (
        update(table)
        .where(table.c.id == eligible)
        .values(claim_token=token, claim_expires_at=lease)
        .returning(table.c.id, table.c.claim_token)
    )
    row = conn.execute(stmt).first()
    if row is None:
        return None
    return Claim(record_id=int(row[0]), token=str(row[1]))


def read_record(conn: Connection, domain: Domain, record_id: int) -> RowMapping | None:
    """Every column of one record, by an ordinary read (D7)."""
    table = domain.table
    return conn.execute(select(table).where(table.c.id == record_id)).mappings().first()


def save_if_held(conn: Connection, domain: Domain, claim: Claim, values: Mapping[str, Any]) -> bool:
    """Write ``values`` to the claimed record only if ``claim`` still holds (P6).

    Returns:
        True when the row matched (the write happened), False when the claim is gone.
    """
    table = domain.table
    result = conn.execute(
        update(table)
        .where(table.c.id == claim.record_id, table.c.claim_token == claim.token)
        .values(**values)
    )
    return result.rowcount == 1


def touch_if_held(conn: Connection, domain: Domain, claim: Claim, now: float) -> bool:
    """Lock and touch the claimed row if the claim holds; the guard for writes made mid-step."""
    return save_if_held(conn, domain, claim, {"updated_at": now})


def extend_claim(conn: Connection, domain: Domain, claim: Claim, expires_at: float) -> bool:
    """Move the lease end of a held claim to ``expires_at`` (heartbeat); False when lost."""
    return save_if_held(conn, domain, claim, {"claim_expires_at": expires_at})


def release_claim(conn: Connection, domain: Domain, claim: Claim, now: float) -> bool:
    """Give a held claim back so the record is claimable at once (graceful stop)."""
    return save_if_held(
        conn, domain, claim, {"claim_token": None, "claim_expires_at": None, "updated_at": now}
    )


def resume_halted(conn: Connection, domain: Domain, record_id: int, now: float) -> str | None:
    """Clear every guard of a halted record in one statement (P9).

    Clears the halt fields, the claim token and expiry, the failure count and the retry pause,
    and re-sets ``state_entered_at``; the stage is kept.

    Returns:
        The stage the record continues from, or None when the record is missing or not halted.
    """
    table = domain.table
    row = conn.execute(
        update(table)
        .where(table.c.id == record_id, table.c.halted_at.is_not(None))
        .values(
            halted_at=None,
            halt_reason=None,
            halt_error=None,
            claim_token=None,
            claim_expires_at=None,
            attempts=0,
            retry_at=None,
            state_entered_at=now,
            updated_at=now,
        )
        .returning(table.c.stage)
    ).first()
    return None if row is None else str(row[0])


def insert_event(
    conn: Connection,
    *,
    domain: str,
    record_id: int,
    stage: str,
    outcome: str,
    outcome_text: str | None,
    origin: str,
    now: float,
) -> None:
    """Append one row to the ``record_events`` journal (D14)."""
    conn.execute(
        insert(record_events).values(
            domain=domain,
            record_id=record_id,
            stage=stage,
            outcome=outcome,
            outcome_text=outcome_text,
            origin=origin,
            created_at=now,
        )
    )
