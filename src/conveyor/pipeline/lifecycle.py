"""The only ways a record moves: apply a step's outcome, halt, resume (P6-P10, D3, D6).

Each function performs one transaction whose record write is conditional on the claim token;
a lost claim writes nothing (the transaction is rolled back, extra writes included) and is
reported as ``False`` (P6).
"""

from __future__ import annotations

import logging
import random
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Engine

from conveyor.clock import Clock
from conveyor.errors import Conflict, DeclarationError, NotFound
from conveyor.pipeline import queries
from conveyor.pipeline.claims import Claim
from conveyor.pipeline.outcomes import Advance, Fail, Halt, Outcome, Postpone, Writes
from conveyor.pipeline.redact import redact
from conveyor.pipeline.stages import Domain

__all__ = ["Applied", "apply_outcome", "entry_values", "resume", "retry_pause"]

log = logging.getLogger("conveyor.pipeline")


@dataclass(frozen=True)
class Applied:
    """What applying an outcome did: ``held`` False means nothing was written (lost claim)."""

    held: bool
    outcome: str
    """``advanced``, ``postponed``, ``failed``, ``halted`` or ``lost``."""
    halt_reason: str | None = None
    retry_in: float | None = None
    """Seconds until the record is claimable again (postpone, retryable failure)."""


def entry_values(stage: str, now: float) -> dict[str, Any]:
    """Queue columns of a record that intake creates at ``stage`` (unclaimed, not halted)."""
    return {"stage": stage, "state_entered_at": now, "attempts": 0, "updated_at": now}


def retry_pause(attempts: int, base: float, cap: float) -> float:
    """Seconds to wait after the ``attempts``-th failure: exponential, half of it jittered.

    ``d = min(cap, base * 2**(attempts-1))``, pause uniformly in ``[d/2, d]`` so retries of many
    records that failed together spread out, yet never retry at once.
    """
    ceiling = min(cap, base * 2.0 ** max(0, attempts - 1))
    return ceiling / 2 + random.uniform(0, ceiling / 2)


def _check_owned(domain: Domain, fields: Mapping[str, Any]) -> None:
    foreign = set(fields) - domain.owned_fields
    if foreign:
        # P7: a step writing owner fields is a programming error, not a record failure.
        raise DeclarationError(
            f"domain {domain.name!r}: a step tried to write fields it does not own: "
            f"{sorted(foreign)}"
        )


def apply_outcome(
    engine: Engine,
    domain: Domain,
    claim: Claim,
    stage: str,
    outcome: Outcome,
    *,
    clock: Clock,
    max_attempts: int,
    retry_base: float,
    retry_max: float,
    attempts: int,
) -> Applied:
    """Write ``outcome`` for the record held by ``claim``, which the step found in ``stage``.

    Args:
        attempts: the record's failure count as read when the step started.

    Returns:
        :class:`Applied`; ``held`` False when the claim was gone and nothing was written.

    Raises:
        DeclarationError: the step wrote a field its domain does not own (P7), or advanced to a
            stage that is not later than the current one.
    """
    now = clock.now()
    if isinstance(outcome, Fail) and attempts + 1 >= max_attempts:
        outcome = Halt(
            "attempts_exhausted", f"failed {attempts + 1} times; last error: {outcome.error}"
        )
    if isinstance(outcome, Fail):
        outcome = Fail(redact(outcome.error) or "")
    elif isinstance(outcome, Halt):
        outcome = Halt(outcome.reason, redact(outcome.error) or "", writes=outcome.writes)
    writes: Writes | None = None
    values: dict[str, Any]
    event_text: str | None
    if isinstance(outcome, Advance):
        _check_owned(domain, outcome.fields)
        target = outcome.to or domain.next_stage(stage).name
        if not domain.is_later(stage, target):
            raise DeclarationError(f"{domain.name}: cannot advance from {stage!r} to {target!r}")
        values = {
            **outcome.fields,
            "stage": target,
            "state_entered_at": now,
            "attempts": 0,
            "retry_at": None,
        }
        writes = outcome.writes
        name, event_text = "advanced", outcome.note or f"{stage} → {target}"
    elif isinstance(outcome, Postpone):
        _check_owned(domain, outcome.fields)
        # D6: stage and state_entered_at stay; waiting is not a failure, so attempts reset.
        values = {
            **outcome.fields,
            "attempts": 0,
            "retry_at": now + outcome.delay,
        }
        writes = outcome.writes
        name, event_text = "postponed", None
    elif isinstance(outcome, Fail):
        failures = attempts + 1
        values = {
            "attempts": failures,
            "retry_at": now + retry_pause(failures, retry_base, retry_max),
        }
        name, event_text = "failed", outcome.error
    else:
        values = {
            "halted_at": now,
            "halt_reason": outcome.reason,
            "halt_error": outcome.error,
        }
        writes = outcome.writes
        name, event_text = "halted", f"{outcome.reason}: {outcome.error}"
    # Every outcome gives the claim back: the record is claimable again once its pause ends.
    values.update(claim_token=None, claim_expires_at=None, updated_at=now)

    with engine.connect() as conn, conn.begin() as tx:
        if writes is not None:
            # Guard first so that extra writes never land for a lost claim.
            if not queries.touch_if_held(conn, domain, claim, now):
                tx.rollback()
                return Applied(held=False, outcome="lost")
            extra = writes(conn) or {}
            _check_owned(domain, extra)
            values.update(extra)
        if not queries.save_if_held(conn, domain, claim, values):
            tx.rollback()
            return Applied(held=False, outcome="lost")
        if name != "postponed":
            queries.insert_event(
                conn,
                domain=domain.name,
                record_id=claim.record_id,
                stage=stage,
                outcome=name,
                outcome_text=event_text,
                origin="pipeline",
                now=now,
            )
    if isinstance(outcome, Halt):
        # P11: the operator learns of a halt from the log and the journal.
        log.warning(
            "%s %s halted at %s: %s: %s",
            domain.noun,
            claim.record_id,
            stage,
            outcome.reason,
            outcome.error,
        )
        return Applied(held=True, outcome=name, halt_reason=outcome.reason)
    retry_at = values.get("retry_at")
    return Applied(
        held=True, outcome=name, retry_in=None if retry_at is None else float(retry_at) - now
    )


def resume(engine: Engine, domain: Domain, record_id: int, *, clock: Clock) -> str:
    """Resume a halted record from the stage it reached, in one action (P9).

    Writes a ``record_events`` row with origin ``human``.

    Returns:
        The stage the record continues from.

    Raises:
        NotFound: no such record.
        Conflict: the record is not halted.
    """
    now = clock.now()
    with engine.begin() as conn:
        stage = queries.resume_halted(conn, domain, record_id, now)
        if stage is None:
            if queries.read_record(conn, domain, record_id) is None:
                raise NotFound(f"{domain.noun} {record_id} does not exist")
            raise Conflict(f"{domain.noun} {record_id} is not halted")
        queries.insert_event(
            conn,
            domain=domain.name,
            record_id=record_id,
            stage=stage,
            outcome="resumed",
            outcome_text=f"resumed at {stage} by the operator",
            origin="human",
            now=now,
        )
    log.info("%s %s resumed at %s", domain.noun, record_id, stage)
    return stage
