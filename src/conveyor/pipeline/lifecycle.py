"""The only ways a record moves: apply a step's outcome, halt, resume (P6-P10, D3, D6).

An outcome is first *planned* (policy: which fields, which pause, which event), then *saved* in a
transaction whose record write is conditional on the claim token; a lost claim writes nothing
(its extra writes are never run) and is reported as ``held`` False (P6). Several planned outcomes
may be saved in one transaction, each still guarded by its own token.

Every time written here is the database's (D17): ``now`` is the SQL expression of
:func:`conveyor.pipeline.queries.now_of`.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Connection, Engine
from sqlalchemy.sql import ColumnElement

from conveyor.clock import Clock
from conveyor.db.notify import announce_work
from conveyor.errors import Conflict, DeclarationError, NotFound
from conveyor.halts import HaltReason
from conveyor.pipeline import queries
from conveyor.pipeline.claims import Claim
from conveyor.pipeline.halts import EngineHalt
from conveyor.pipeline.outcomes import Advance, Fail, Halt, Outcome, Postpone, Writes
from conveyor.pipeline.redact import redact
from conveyor.pipeline.stages import Declaration, Domain

__all__ = [
    "Applied",
    "Planned",
    "Resumed",
    "admit",
    "apply_outcome",
    "database_now",
    "entry_values",
    "halted_ids",
    "plan_outcome",
    "reopen",
    "report",
    "resume",
    "resume_many",
    "retry_pause",
    "save_planned",
]

# Records resumed per transaction by resume_many: short transactions, few round trips.
_RESUME_BATCH = 200

log = logging.getLogger("conveyor.pipeline")


@dataclass(slots=True)
class Applied:
    """What applying an outcome did: ``held`` False means nothing was written (lost claim)."""

    held: bool
    outcome: str
    """``advanced``, ``postponed``, ``failed``, ``halted`` or ``lost``."""
    halt_reason: HaltReason | None = None
    retry_in: float | None = None
    """Seconds until the record is claimable again (postpone, retryable failure)."""


@dataclass(slots=True)
class Planned:
    """An outcome turned into the writes that save it, not yet saved.

    Attributes:
        claim: the claim whose token guards the write.
        stage: the stage the step found the record in.
        outcome: ``advanced``, ``postponed``, ``failed`` or ``halted``.
        values: record columns to set to plain values.
        times: record columns to set to the database's now plus so many seconds (D17).
        writes: extra writes of the step, run in the save's transaction while the claim holds.
        event_text: the journal text; a postpone without a note writes no event.
        target: the stage an advance moves to.
        halt: the halt, for the log (P11).
        retry_in: seconds of the retry pause written, if any.
    """

    claim: Claim
    stage: str
    outcome: str
    values: dict[str, Any]
    times: dict[str, float]
    writes: Writes | None = None
    event_text: str | None = None
    target: str | None = None
    halt: Halt | None = None
    retry_in: float | None = None


def entry_values(stage: str, now: ColumnElement[float] | float) -> dict[str, Any]:
    """Queue columns of a record that intake creates at ``stage`` (unclaimed, not halted).

    ``now`` should be :func:`~conveyor.pipeline.queries.now_of` the intake's clock, so that a
    record's first time is the database's like every later one (D17).
    """
    return {"stage": stage, "state_entered_at": now, "attempts": 0, "updated_at": now}


def database_now(conn: Connection, clock: Clock) -> float:
    """The database's time, epoch seconds, read in ``conn`` (D17): what code outside a step
    dates the rows it writes beside a record (an intake's file row, the record's own
    ``created_at``), so no host's clock enters the database. A clock that drives database time
    (``FakeClock``) answers without a round trip.
    """
    if clock.drives_database_time:
        return clock.now()
    return queries.read_now(conn, queries.now_of(clock))


def admit(
    conn: Connection,
    declaration: Declaration | Domain,
    *,
    fields: Mapping[str, Any],
    clock: Clock,
    note: str,
) -> int:
    """Admit a new record at its domain's first stage, in the caller's open transaction: the
    one way in.

    Writes the record into the declaration's table (``fields`` plus unclaimed, unhalted queue
    columns dated by the database's clock, D17), its ``accepted`` journal row with origin
    ``human`` (D14), and announces the work: idle workers of this process wake after the commit,
    those of other processes at commit (PostgreSQL); the caller publishes nothing.

    Returns:
        The new record's id.
    """
    table, domain, stage = declaration.table, declaration.name, declaration.stages[0].name
    now = queries.now_of(clock)
    record_id = queries.insert_record(conn, table, {**fields, **entry_values(stage, now)})
    queries.insert_event(
        conn,
        domain=domain,
        record_id=record_id,
        stage=stage,
        outcome="accepted",
        outcome_text=note,
        origin="human",
        now=now,
    )
    announce_work(conn)
    return record_id


def reopen(
    conn: Connection,
    declaration: Declaration | Domain,
    record_id: int,
    *,
    done: str,
    to: str,
    clock: Clock,
    note: str,
) -> bool:
    """Send a record that reached its final stage ``done`` back to the earlier stage ``to``,
    in the caller's open transaction: new work for it arrived from outside (a Live Photo's
    movie for its still). Only an unhalted record at ``done`` moves (no claim holds one there);
    the move is journalled with origin ``human`` (outcome ``reopened``, D14) and idle workers
    are told.

    Returns:
        True when the record moved; False when it is elsewhere (its steps will see the new
        work when they run) or halted.
    """
    now = queries.now_of(clock)
    if not queries.reopen_record(conn, declaration.table, record_id, done=done, to=to, now=now):
        return False
    queries.insert_event(
        conn,
        domain=declaration.name,
        record_id=record_id,
        stage=to,
        outcome="reopened",
        outcome_text=note,
        origin="human",
        now=now,
    )
    announce_work(conn)
    return True


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


def plan_outcome(
    domain: Domain,
    claim: Claim,
    stage: str,
    outcome: Outcome,
    *,
    now: ColumnElement[float],
    max_attempts: int,
    retry_base: float,
    retry_max: float,
    attempts: int,
) -> Planned:
    """Decide the writes of ``outcome`` for the record held by ``claim`` found in ``stage``.

    Args:
        attempts: the record's failure count as read when the step started.

    Raises:
        DeclarationError: the step wrote a field its domain does not own (P7), or advanced to a
            stage that is not later than the current one.
    """
    if isinstance(outcome, Fail) and attempts + 1 >= max_attempts:
        outcome = Halt(
            EngineHalt.ATTEMPTS_EXHAUSTED,
            f"failed {attempts + 1} times; last error: {outcome.error}",
        )
    # Every outcome gives the claim back: the record is claimable again once its pause ends.
    release: dict[str, Any] = {
        "claim_token": None,
        "claim_expires_at": None,
        "step_started_at": None,
    }
    if isinstance(outcome, Advance):
        if outcome.fields:
            _check_owned(domain, outcome.fields)
        if not outcome.to:
            target = domain.next_stage(stage).name
        else:
            target = outcome.to
            if not domain.is_later(stage, target):
                raise DeclarationError(
                    f"{domain.name}: cannot advance from {stage!r} to {target!r}"
                )
        values = {
            **outcome.fields,
            "stage": target,
            "work_started_at": None,
            "attempts": 0,
            "retry_at": None,
            **release,
        }
        return Planned(
            claim,
            stage,
            "advanced",
            values,
            {"state_entered_at": 0.0, "updated_at": 0.0},
            outcome.writes,
            outcome.note or f"{stage} → {target}",
            target=target,
        )
    if isinstance(outcome, Postpone):
        _check_owned(domain, outcome.fields)
        # D6: stage, state_entered_at and the stuck countdown stay; waiting is not a failure.
        return Planned(
            claim,
            stage,
            "postponed",
            {**outcome.fields, "attempts": 0, **release},
            {"retry_at": outcome.delay, "updated_at": 0.0},
            outcome.writes,
            redact(outcome.note) if outcome.note is not None else None,
            retry_in=outcome.delay,
        )
    if isinstance(outcome, Fail):
        failures = attempts + 1
        pause = retry_pause(failures, retry_base, retry_max)
        return Planned(
            claim,
            stage,
            "failed",
            {"attempts": failures, **release},
            {"retry_at": pause, "updated_at": 0.0},
            event_text=redact(outcome.error),
            retry_in=pause,
        )
    halt = Halt(outcome.reason, redact(outcome.error) or "", writes=outcome.writes)
    return Planned(
        claim,
        stage,
        "halted",
        {"halt_reason": halt.reason.value, "halt_error": halt.error, **release},
        {"halted_at": 0.0, "updated_at": 0.0},
        halt.writes,
        f"{halt.reason}: {halt.error}",
        halt=halt,
    )


class BatchMismatch(Exception):
    """A batched save matched fewer rows than it had plans: some claim was lost; the caller
    rolls back and saves the plans one at a time to learn which."""


def save_planned(
    conn: Connection, domain: Domain, plans: Sequence[Planned], now: ColumnElement[float]
) -> list[bool]:
    """Save planned outcomes in the open transaction of ``conn``, each guarded by its token.

    A plan whose claim is gone writes nothing, its extra writes included (P6): they run only
    after its fenced record write matched. The journal rows of the saved ones are written
    together (D14). When one of them advances a record into another lane, waiting workers of
    other processes (and live pages) are told, in this transaction (PostgreSQL).

    Returns:
        For each plan, whether its claim held (its outcome was written).

    Raises:
        DeclarationError: extra writes returned fields the domain does not own (P7).
        Exception: whatever an extra write or the save raised; the caller rolls back.
    """
    held = [True] * len(plans)
    events: list[dict[str, Any]] = []
    hand_off = False
    # One guarded write per shape (the columns set, and the seconds each time column is set
    # ahead: a retry pause is each record's own), sent as one executemany.
    groups: dict[tuple[tuple[str, ...], tuple[tuple[str, float], ...]], list[Planned]] = {}
    for plan in plans:
        key = (tuple(sorted(plan.values)), tuple(sorted(plan.times.items())))
        groups.setdefault(key, []).append(plan)
    for group in groups.values():
        matched = queries.save_many(
            conn, domain, now, [p.claim for p in group], [p.values for p in group], group[0].times
        )
        if matched != len(group):
            if len(plans) > 1:
                raise BatchMismatch(f"{matched} of {len(group)} claims held")
            held = [False]
    for plan, ok in zip(plans, held, strict=True):
        if ok and plan.writes is not None:
            # Only now that its guarded write matched (the claim held, and the row is locked
            # by this transaction) do the step's extra writes run: never for a lost claim,
            # and no separate guard costs a round trip.
            extra = plan.writes(conn) or {}
            if extra:
                _check_owned(domain, extra)
                queries.update_saved(conn, domain, plan.claim.record_id, extra)
    for plan, ok in zip(plans, held, strict=True):
        if not ok:
            continue
        if plan.target is not None and (
            domain.stage(plan.target).lane != domain.stage(plan.stage).lane
        ):
            hand_off = True
        # A postpone is journaled only when its step gave a note (a wait for a new reason).
        if plan.outcome != "postponed" or plan.event_text is not None:
            events.append(
                {
                    "domain": domain.name,
                    "record_id": plan.claim.record_id,
                    "stage": plan.stage,
                    "outcome": plan.outcome,
                    "outcome_text": plan.event_text,
                    "origin": "pipeline",
                }
            )
    if events:
        # The hand-off's notification rides on the journal's insert: no round trip of its own.
        queries.insert_events(conn, events, now, announce=hand_off)
    elif hand_off:
        announce_work(conn)
    return held


def report(domain: Domain, plan: Planned, held: bool) -> Applied:
    """What a save did, logging a halt (P11: the operator learns of it from the log)."""
    if not held:
        return Applied(held=False, outcome="lost")
    if plan.halt is not None:
        # P11: the operator learns of a halt, and what to do about it, from the log.
        log.warning(
            "%s %s halted at %s: %s: %s (%s)",
            domain.noun,
            plan.claim.record_id,
            plan.stage,
            plan.halt.reason,
            plan.halt.error,
            plan.halt.reason.way_forward(),
        )
        return Applied(held=True, outcome=plan.outcome, halt_reason=plan.halt.reason)
    if plan.outcome == "postponed" and plan.event_text is not None:
        # The operator learns once that a record waits, and why; not on every try (D6).
        log.info(
            "%s %s postponed at %s: %s",
            domain.noun,
            plan.claim.record_id,
            plan.stage,
            plan.event_text,
        )
    return Applied(held=True, outcome=plan.outcome, retry_in=plan.retry_in)


def apply_outcome(
    engine: Engine | Connection,
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
    """Plan and save one outcome in its own transaction (see :func:`plan_outcome`).

    Returns:
        :class:`Applied`; ``held`` False when the claim was gone and nothing was written.

    Raises:
        DeclarationError: as :func:`plan_outcome`.
    """
    now = queries.now_of(clock)
    plan = plan_outcome(
        domain,
        claim,
        stage,
        outcome,
        now=now,
        max_attempts=max_attempts,
        retry_base=retry_base,
        retry_max=retry_max,
        attempts=attempts,
    )
    if isinstance(engine, Connection):
        with engine.begin():
            (held,) = save_planned(engine, domain, [plan], now)
    else:
        with engine.begin() as conn:
            (held,) = save_planned(conn, domain, [plan], now)
    return report(domain, plan, held)


def resume(engine: Engine, domain: Domain, record_id: int, *, clock: Clock) -> str:
    """Resume a halted record from the stage it reached, in one action (P9).

    Writes a ``record_events`` row with origin ``human``; idle workers of this process and, on
    PostgreSQL, of every process wake after the commit (the caller publishes nothing).

    Returns:
        The stage the record continues from.

    Raises:
        NotFound: no such record.
        Conflict: the record is not halted.
    """
    now = queries.now_of(clock)
    with engine.begin() as conn:
        stage = _resume_one(conn, domain, record_id, now, by="the operator")
        if stage is None:
            if queries.read_record(conn, domain, record_id) is None:
                raise NotFound(f"{domain.noun} {record_id} does not exist")
            raise Conflict(f"{domain.noun} {record_id} is not halted")
    log.info("%s %s resumed at %s", domain.noun, record_id, stage)
    return stage


def _resume_one(
    conn: Connection, domain: Domain, record_id: int, now: ColumnElement[float], *, by: str
) -> str | None:
    """Resume one halted record inside ``conn``, journal it (origin ``human``, P9, D14) and
    announce the work (idle workers wake after the commit).

    Returns the stage it continues from, or ``None`` when it is not halted or does not exist.
    """
    stage = queries.resume_halted(conn, domain, record_id, now)
    if stage is not None:
        queries.insert_event(
            conn,
            domain=domain.name,
            record_id=record_id,
            stage=stage,
            outcome="resumed",
            outcome_text=f"resumed at {stage} by {by}",
            origin="human",
            now=now,
        )
        announce_work(conn)
    return stage


def halted_ids(
    engine: Engine, domain: Domain, *, reason: str | None = None, stage: str | None = None
) -> list[int]:
    """Freeze the set of halted records a bulk resume is about: their ids, oldest first.

    Args:
        reason: only records halted with this reason (e.g. ``stuck``, ``attempts_exhausted``).
        stage: only records halted at this stage.
    """
    if stage is not None:
        domain.stage(stage)  # DeclarationError for a stage the domain does not have
    with engine.connect() as conn:
        return queries.halted_ids(conn, domain, reason=reason, stage=stage)


@dataclass(frozen=True)
class Resumed:
    """What :func:`resume_many` did: the ids resumed, and those it left (no longer halted or
    gone since the set was frozen)."""

    resumed: list[int]
    skipped: list[int]


def resume_many(
    engine: Engine, domain: Domain, record_ids: Sequence[int], *, clock: Clock
) -> Resumed:
    """Resume exactly these records, each as :func:`resume` does (P9), in batches.

    The set is the caller's, frozen beforehand (by :func:`halted_ids`, or picked by a person in
    the operator's view): a record of the set that is no longer halted — resumed by someone
    else, deleted — is skipped, never an error, and no record outside the set is touched,
    even one halted since with the same reason.
    """
    now = queries.now_of(clock)
    resumed: list[int] = []
    skipped: list[int] = []
    ordered = list(dict.fromkeys(record_ids))
    for start in range(0, len(ordered), _RESUME_BATCH):
        with engine.begin() as conn:
            for record_id in ordered[start : start + _RESUME_BATCH]:
                # An id no row can have (typed by a person) is skipped, not sent to the driver.
                if not 0 < record_id < 2**63:
                    skipped.append(record_id)
                    continue
                stage = _resume_one(conn, domain, record_id, now, by="the operator (bulk)")
                (skipped if stage is None else resumed).append(record_id)
    if resumed:
        log.info("%d %ss resumed in bulk", len(resumed), domain.noun)
    return Resumed(resumed, skipped)
