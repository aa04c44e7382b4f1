"""The engine's SQL statements, by name (SQLAlchemy Core; policy lives in lifecycle/executor).

Every write that acts on behalf of a claim is conditional on ``claim_token = :token`` and
reports whether it matched (P6). None of these statements touches owner fields (P7).

Time (D17): every statement takes ``now``, a SQL expression from :func:`now_of`: the database's
clock in production, a bound test clock in tests. A worker's own clock never enters a statement
that decides who may act.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from sqlalchemy import (
    Connection,
    Double,
    Integer,
    Row,
    RowMapping,
    Select,
    String,
    Table,
    Update,
    and_,
    bindparam,
    case,
    delete,
    func,
    insert,
    literal,
    literal_column,
    null,
    or_,
    select,
    text,
    union_all,
    update,
)
from sqlalchemy.ext.compiler import compiles
from sqlalchemy.sql import ColumnElement
from sqlalchemy.sql.elements import UnaryExpression
from sqlalchemy.sql.sqltypes import NullType
from sqlalchemy.sql.util import ClauseAdapter
from sqlalchemy.sql.visitors import InternalTraversal

from conveyor.clock import Clock
from conveyor.db.notify import CHANNEL
from conveyor.db.now import db_now, db_token
from conveyor.db.tables import record_events
from conveyor.pipeline.claims import Claim
from conveyor.pipeline.driver import ManyStatement, dialect_key
from conveyor.pipeline.stages import Domain, Stage

__all__ = [
    "CLOCK_STEP_TOLERANCE",
    "NO_SORT",
    "any_lapsed",
    "backlog",
    "claim_and_read",
    "claim_and_read_statement",
    "claim_order",
    "claim_statement",
    "claim_with",
    "claimable",
    "delete_events",
    "extend_claim",
    "halted_ids",
    "has_statistics",
    "insert_event",
    "insert_events",
    "insert_record",
    "lapsed",
    "lapsed_claims",
    "longest_lease",
    "mark_started",
    "next_hold_end",
    "now_of",
    "read_claimed",
    "read_now",
    "read_record",
    "read_statement",
    "release_claim",
    "release_claims",
    "reopen_record",
    "resume_halted",
    "save_if_held",
    "save_many",
    "touch_if_held",
    "update_saved",
]

# Seconds the database's clock may step back before a retry pause or a lease reaching further
# ahead than any the engine writes is taken for a leftover of the old time (D17): a clock set
# back an hour must not freeze every waiting record for an hour. Smaller steps only delay.
CLOCK_STEP_TOLERANCE = 60.0


def now_of(clock: Clock) -> ColumnElement[float]:
    """The current time as the engine's statements read it (D17).

    Returns:
        The database's clock (:class:`~conveyor.db.now.db_now`), or, for a clock with
        ``drives_database_time`` (``FakeClock``), its time bound at each execution.
    """
    if clock.drives_database_time:
        return bindparam("_now", type_=Double(), callable_=clock.now)
    return db_now()


def read_now(conn: Connection, now: ColumnElement[float]) -> float:
    """The time ``now`` stands for, read once: epoch seconds (D17)."""
    return float(conn.execute(select(now)).scalar_one())


def claim_order(domain: Domain) -> list[ColumnElement[Any]]:
    """The domain's sort value(s), then the primary key as tie-break unless already there (P5)."""
    pk = domain.table.c.id
    order = list(domain.order_by)
    last = order[-1] if order else None
    inner = last.element if isinstance(last, UnaryExpression) else last
    if inner is not pk:
        order.append(pk)
    return order


def longest_lease(domain: Domain) -> float:
    """The longest lease of the domain's stages: a lease reaching further ahead than this plus
    :data:`CLOCK_STEP_TOLERANCE` is a leftover of a clock set back (D17)."""
    return max((s.lease for s in domain.stages if not s.terminal), default=0.0)


def claimable(
    domain: Domain,
    stages: Sequence[str],
    now: ColumnElement[float],
    *,
    begun: bool | None = None,
    unestimated: bool = False,
) -> ColumnElement[bool]:
    """THE test of "a worker of these stages could take this record now", as one SQL
    expression: the claim, the backlog and a record's place in its queue all use it.

    Claimable: in one of ``stages``, not halted (P10), past its retry pause, and either
    unclaimed or under a claim that lapsed before its step started. A claim that lapsed after
    its step started is the rescuer's first (D18: a failed attempt, "worker lost"); only then
    is the record claimable again. A retry pause or lease reaching further ahead than the
    engine ever writes is a leftover of a clock set back, and over (D17).

    Args:
        begun: True or False narrows it to records whose work in their stage has begun
            (``work_started_at`` set) or not: the two parts of the claim (D19), each stated
            so that it reads its own partial index.
        unestimated: the claim's own form. On PostgreSQL every term but those of the partial
            index's predicate is one expression the planner does not estimate (it takes half
            the index's rows to pass, with statistics or without), so it walks the index in
            claim order and stops at the claim's limit. Estimated, those terms (``IS NULL`` of
            columns it has no statistics for yet: 0.5 % each) made it expect a row or two to
            pass on a table not yet analysed, and read and sort every open record per claim
            instead (3 ms at 10,000 waiting; 0.2 ms walking the index).
    """
    table = domain.table
    ahead = longest_lease(domain) + CLOCK_STEP_TOLERANCE
    not_begun = table.c.work_started_at.is_(None)
    if begun:
        # The begun index's predicate: its records are never terminal (an advance clears
        # work_started_at), and the claim index's own term is left out so that SQLite cannot
        # take that index (all open records) for this part, whatever its statistics say.
        index_terms: list[ColumnElement[bool]] = [table.c.work_started_at.is_not(None)]
    else:
        # The claim index's own predicate, word for word: SQLite uses a partial index only for
        # a query that states its WHERE, and without it scans and sorts every row.
        index_terms = [table.c.stage != _sql_text(name) for name in domain.terminal_stages]
        if begun is False:
            index_terms.append(not_begun)
    # Stage names are the declaration's constants, written into the SQL: the statement is
    # the same text for every execution (no list expanded per call).
    stage_in = table.c.stage.in_([_sql_text(name) for name in stages])
    due = or_(
        table.c.retry_at.is_(None),
        table.c.retry_at <= now,
        # The clock went back since the pause was written (D17): the pause is over.
        table.c.updated_at > now + CLOCK_STEP_TOLERANCE,
    )
    free = or_(
        table.c.claim_token.is_(None),
        and_(
            table.c.step_started_at.is_(None),
            or_(table.c.claim_expires_at <= now, table.c.claim_expires_at > now + ahead),
        ),
    )
    if unestimated:
        predicate = [t for t in index_terms if t is not not_begun]
        rest = [stage_in, *(t for t in index_terms if t is not_begun), due, free]
        return and_(table.c.halted_at.is_(None), *predicate, _Unestimated(and_(*rest)))
    return and_(stage_in, table.c.halted_at.is_(None), *index_terms, due, free)


class _Unestimated(ColumnElement[bool]):
    """A condition PostgreSQL's planner cannot estimate (``CASE WHEN … THEN true ELSE false
    END``: half the rows, whatever its statistics); the condition itself elsewhere."""

    inherit_cache = True
    type = NullType()  # type: ignore[assignment]  # as _AmongIds: no "= 1" appended on SQLite
    _traverse_internals = [  # noqa: RUF012 (SQLAlchemy's own convention)
        ("clause", InternalTraversal.dp_clauseelement),
    ]

    def __init__(self, clause: ColumnElement[bool]) -> None:
        self.clause = clause


@compiles(_Unestimated)
def _unestimated(element: _Unestimated, compiler: Any, **kw: Any) -> str:
    return str(compiler.process(element.clause, **kw))


@compiles(_Unestimated, "postgresql")
def _unestimated_postgresql(element: _Unestimated, compiler: Any, **kw: Any) -> str:
    return f"CASE WHEN {compiler.process(element.clause, **kw)} THEN true ELSE false END"


def lapsed(domain: Domain, now: ColumnElement[float]) -> ColumnElement[bool]:
    """A claim whose step had started and whose lease ran out (or reaches impossibly far
    ahead, D17): its worker died, hung or lost its database (D18)."""
    table = domain.table
    ahead = longest_lease(domain) + CLOCK_STEP_TOLERANCE
    return and_(
        table.c.step_started_at.is_not(None),
        table.c.claim_token.is_not(None),
        table.c.halted_at.is_(None),
        or_(table.c.claim_expires_at <= now, table.c.claim_expires_at > now + ahead),
    )


class _AmongIds(ColumnElement[bool]):
    """``id IN (subquery)``; on PostgreSQL ``id = ANY(ARRAY(subquery))``, which the planner
    runs as the subquery once, then one primary-key lookup per id: with statistics, it would
    otherwise join the subquery to a scan of the whole table, finished records included."""

    inherit_cache = True
    # Not Boolean: SQLite (no native booleans) would append "= 1" to it in a WHERE.
    type = NullType()  # type: ignore[assignment]
    _traverse_internals = [  # noqa: RUF012 (SQLAlchemy's own convention)
        ("column", InternalTraversal.dp_clauseelement),
        ("ids", InternalTraversal.dp_clauseelement),
    ]

    def __init__(self, column: ColumnElement[Any], ids: Select[Any]) -> None:
        self.column = column
        self.ids = ids


@compiles(_AmongIds)
def _among_ids(element: _AmongIds, compiler: Any, **kw: Any) -> str:
    column = compiler.process(element.column, **kw)
    ids = compiler.process(element.ids, **{**kw, "asfrom": False})
    return f"{column} IN ({ids})"


@compiles(_AmongIds, "postgresql")
def _among_ids_postgresql(element: _AmongIds, compiler: Any, **kw: Any) -> str:
    column = compiler.process(element.column, **kw)
    # Inside a WITH (the claim and its read, one statement) the compiler passes asfrom itself.
    ids = compiler.process(element.ids, **{**kw, "asfrom": False})
    return f"{column} = ANY(ARRAY({ids}))"


def claim_statement(
    domain: Domain,
    stages: Sequence[Stage],
    now: ColumnElement[float],
    *,
    started: bool = True,
    hold: float | None = None,
) -> Update:
    """The claim of up to ``:_limit`` records in ``stages``, as ONE statement (P1, P3-P5).

    Eligible: :func:`claimable`. Order (P5, D19): records already begun in their stage
    (``work_started_at`` set: rescued from a lost worker, retried, waiting on their provider)
    before records not begun, each part in the domain's sort value, then the primary key.
    Every claimed row gets a token of its own, made by the database, and a lease from its own
    stage (P4). The first claim in a stage starts the stuck countdown (``work_started_at``, D3).
    PostgreSQL skips rows another claimer has locked; SQLite serialises writers.

    Args:
        started: the claim is its step's start (an idle executor takes it at once):
            ``step_started_at`` is set, and a lapse of this claim is a lost worker (D18).
            Otherwise the claim is not started; :func:`mark_started` starts it.
        hold: the lease of a claim that is not started, in seconds (a prefetched record); the
            stage's lease when None. Its lease starts in full when its step starts.

    Build it once per lane and run it with :func:`claim_with`.
    """
    table = domain.table
    names = [s.name for s in stages]
    order = claim_order(domain)
    limit = bindparam("_limit", type_=Integer())
    parts = []
    for begun in (True, False):
        part = (
            select(table.c.id)
            .where(claimable(domain, names, now, begun=begun, unestimated=True))
            .order_by(*order)
            .limit(limit)
            .with_for_update(skip_locked=True)
            .subquery()
        )
        parts.append(select(part.c.id))
    both = union_all(*parts).subquery()
    eligible = select(both.c.id).limit(limit)

    def lease_of(stage: Stage) -> float:
        return stage.lease if hold is None else min(stage.lease, hold)

    lease = case({s.name: now + lease_of(s) for s in stages}, value=table.c.stage, else_=now)
    return (
        update(table)
        .where(_AmongIds(table.c.id, eligible))
        .values(
            claim_token=db_token(),
            claim_expires_at=lease,
            work_started_at=func.coalesce(table.c.work_started_at, now),
            step_started_at=now if started else null(),
            claimed_by=bindparam("_holder", type_=String()),
        )
        .returning(table.c.id, table.c.claim_token)
    )


def _sql_text(value: str) -> ColumnElement[str]:
    """A string constant of a declaration written into the statement as a SQL literal."""
    return literal_column("'" + value.replace("'", "''") + "'", String())


def claim_with(
    conn: Connection, statement: Update, limit: int, holder: str | None = None
) -> list[Claim]:
    """Run a :func:`claim_statement` as ``holder`` (written to ``claimed_by``: every claim names
    its holder); the claims in no particular order, [] when no work (P12)."""
    rows = conn.execute(statement, {"_limit": limit, "_holder": holder or None}).all()
    return [Claim(record_id=int(r[0]), token=str(r[1])) for r in rows]


def claim_and_read_statement(
    domain: Domain, claim: Update, now: ColumnElement[float]
) -> Select[Any]:
    """PostgreSQL: a :func:`claim_statement` and the read of what it claimed as ONE statement
    (a data-modifying ``WITH``): every column as the claim left it (D7), in claim order, with
    the database's time as ``_db_now``. Its transaction commits without waiting for its WAL
    flush (``set_config('synchronous_commit', 'off', true)``, the claim's own: a claim lost in
    a crash merely expires, P4), so run alone it is one round trip (:func:`claim_and_read`).
    """
    table = domain.table
    claimed = claim.returning(*(c for c in table.c if c.key not in ("id", "claim_token"))).cte(
        "claimed"
    )
    adapt = ClauseAdapter(claimed)
    return select(
        *(claimed.c[c.key] for c in table.c),
        now.label("_db_now"),
        func.set_config("synchronous_commit", "off", True).label("_commit"),
    ).order_by(*(adapt.traverse(o) for o in claim_order(domain)))


def claim_and_read(
    conn: Connection, statement: Select[Any], limit: int, holder: str | None = None
) -> list[Row[Any]]:
    """Run a :func:`claim_and_read_statement` as ``holder``: the claimed rows ([] when no
    work, P12), each with ``claim_token`` and ``_db_now``."""
    return list(conn.execute(statement, {"_limit": limit, "_holder": holder or None}).all())


def read_statement(domain: Domain, now: ColumnElement[float]) -> Select[Any]:
    """Every column of the records ``:_ids``, in claim order, and the database's time."""
    table = domain.table
    return (
        select(*table.c, now.label("_db_now"))
        .where(table.c.id.in_(bindparam("_ids", expanding=True)))
        .order_by(*claim_order(domain))
    )


def read_claimed(conn: Connection, statement: Select[Any], ids: Sequence[int]) -> list[Row[Any]]:
    """Read claimed records in one query (D7: an ordinary read after the claim)."""
    return list(conn.execute(statement, {"_ids": list(ids)}).all())


def insert_record(conn: Connection, table: Table, values: Mapping[str, Any]) -> int:
    """Insert one record row (plain values or SQL expressions); returns its id."""
    result = conn.execute(insert(table).values(**values))
    assert result.inserted_primary_key is not None
    return int(result.inserted_primary_key[0])


def read_record(conn: Connection, domain: Domain, record_id: int) -> RowMapping | None:
    """Every column of one record, by an ordinary read (D7)."""
    table = domain.table
    return conn.execute(select(table).where(table.c.id == record_id)).mappings().first()


def save_if_held(conn: Connection, domain: Domain, claim: Claim, values: Mapping[str, Any]) -> bool:
    """Write ``values`` (plain values or SQL expressions) only if ``claim`` still holds (P6).

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


def update_saved(
    conn: Connection, domain: Domain, record_id: int, values: Mapping[str, Any]
) -> None:
    """Write more columns of a record whose outcome the open transaction of ``conn`` has just
    saved under its claim (its row locked by that write, its token already given back): the
    fields a step's extra writes return (P7 checked by the caller)."""
    table = domain.table
    conn.execute(update(table).where(table.c.id == record_id).values(**values))


_SAVES: dict[tuple[object, ...], tuple[object, ManyStatement]] = {}


def _save_statement(
    conn: Connection,
    domain: Domain,
    now: ColumnElement[float],
    plain: tuple[str, ...],
    times: tuple[str, ...],
) -> ManyStatement:
    """The guarded update of ``plain`` columns and ``now``-relative ``times``, built once."""
    key = (dialect_key(conn.dialect), domain.table.name, id(now), plain, times)
    cached = _SAVES.get(key)
    if cached is not None and cached[0] is now:
        return cached[1]
    if len(_SAVES) > 512:  # statements of executors long gone
        _SAVES.clear()
    table = domain.table
    values: dict[str, Any] = {name: bindparam(name) for name in plain}
    values.update({name: now + bindparam(f"_t_{name}", type_=Double()) for name in times})
    statement = (
        update(table)
        .where(table.c.id == bindparam("_id"), table.c.claim_token == bindparam("_token"))
        .values(values)
    )
    many = ManyStatement(statement, conn.dialect, [*plain, *(f"_t_{n}" for n in times)])
    _SAVES[key] = (now, many)
    return many


def save_many(
    conn: Connection,
    domain: Domain,
    now: ColumnElement[float],
    claims: Sequence[Claim],
    values: Sequence[Mapping[str, Any]],
    times: Mapping[str, float],
) -> int:
    """Write each claim's ``values`` (same columns for all) and the columns ``times`` (the
    database's now plus so many seconds), each only while its own claim holds (P6), as one
    statement run for many.

    Returns:
        How many of the claims held (rows written).
    """
    if not claims:
        return 0
    statement = _save_statement(conn, domain, now, tuple(sorted(values[0])), tuple(sorted(times)))
    offsets = {f"_t_{name}": seconds for name, seconds in times.items()}
    params = [
        {**v, **offsets, "_id": c.record_id, "_token": c.token}
        for c, v in zip(claims, values, strict=True)
    ]
    return statement.run(conn, params)


def touch_if_held(
    conn: Connection, domain: Domain, claim: Claim, now: ColumnElement[float]
) -> bool:
    """Lock and touch the claimed row if the claim holds; the guard for writes made mid-step."""
    return save_if_held(conn, domain, claim, {"updated_at": now})


def extend_claim(
    conn: Connection, domain: Domain, claim: Claim, now: ColumnElement[float], lease: float
) -> bool:
    """Heartbeat: move the lease end of a held claim to ``now + lease``; False when lost."""
    return save_if_held(conn, domain, claim, {"claim_expires_at": now + lease})


def mark_started(
    conn: Connection, domain: Domain, claim: Claim, now: ColumnElement[float], lease: float
) -> float | None:
    """Start the step of a held claim that was not started (a prefetched record): its lease
    runs in full from now, and its lapse is from now on a lost worker (D18), in one statement.

    Returns:
        The database's time of the start (epoch seconds, D17), or None when the claim is gone
        (it lapsed and another worker took the record): the step must not run.
    """
    table = domain.table
    row = conn.execute(
        update(table)
        .where(table.c.id == claim.record_id, table.c.claim_token == claim.token)
        .values(claim_expires_at=now + lease, step_started_at=now)
        .returning(now)
    ).first()
    return None if row is None else float(row[0])


NO_SORT = "SELECT set_config('enable_sort', 'off', true), set_config('jit', 'off', true)"
"""PostgreSQL: the settings a claim's transaction runs under while its table has no statistics
(see :func:`has_statistics`), in one statement. Without ``jit`` off, the cost the planner gives
the sort it cannot avoid (the few claimed rows, put in claim order) under ``enable_sort = off``
passes ``jit_above_cost``, and compiling the statement took seconds."""


def has_statistics(conn: Connection, table: Table) -> bool:
    """PostgreSQL: whether the planner has column statistics for ``table`` (an ``ANALYZE``,
    autovacuum's or anyone's, has run since it was filled).

    Without them it guesses the partial index of open records holds a row or two (its
    predicate's ``IS NULL`` is a 0.5 % guess), so it reads and sorts every open record for each
    claim instead of walking that index in claim order to the limit: milliseconds per claim
    after a bulk load into a table autovacuum has not analysed yet. The claim runs under
    :data:`NO_SORT` until this is true.
    """
    found = conn.execute(
        text(
            "SELECT 1 FROM pg_catalog.pg_stats "
            "WHERE schemaname = current_schema() AND tablename = :table LIMIT 1"
        ),
        {"table": table.name},
    ).first()
    return found is not None


def next_hold_end(
    conn: Connection, domain: Domain, stages: Sequence[str], now: ColumnElement[float]
) -> float | None:
    """Seconds until the first claim in ``stages`` that holds a record without a started
    step (a prefetch) lapses, or None when there is none: an idle worker looks again then."""
    table = domain.table
    ahead = longest_lease(domain) + CLOCK_STEP_TOLERANCE
    found = conn.execute(
        select(func.min(table.c.claim_expires_at - now)).where(
            table.c.stage.in_([_sql_text(name) for name in stages]),
            table.c.halted_at.is_(None),
            *(table.c.stage != _sql_text(name) for name in domain.terminal_stages),
            table.c.claim_token.is_not(None),
            table.c.step_started_at.is_(None),
            table.c.claim_expires_at <= now + ahead,
        )
    ).scalar()
    return None if found is None else max(0.0, float(found))


def overstayed(
    domain: Domain, now: ColumnElement[float], limits: Mapping[str, float]
) -> ColumnElement[bool]:
    """A started claim still held (its heartbeat renews the lease, so it never lapses) on a
    record whose work in its stage began longer ago than the stage's limit (D3): a step that
    hangs. ``limits``: stage name → seconds (:meth:`~conveyor.pipeline.Stage.work_limit`)."""
    table = domain.table
    limit = case(
        {name: literal(float(seconds), Double()) for name, seconds in limits.items()},
        value=table.c.stage,
        else_=null(),
    )
    return and_(
        table.c.step_started_at.is_not(None),
        table.c.claim_token.is_not(None),
        table.c.halted_at.is_(None),
        table.c.work_started_at.is_not(None),
        table.c.claim_expires_at > now,  # a lapsed one is a lost worker's (D18), not this
        table.c.work_started_at < now - limit,
    )


def any_lapsed(
    conn: Connection,
    domain: Domain,
    now: ColumnElement[float],
    limits: Mapping[str, float],
) -> bool:
    """Whether any claim of ``domain`` is :func:`lapsed` or :func:`overstayed` (``limits``:
    stage name → seconds, as :func:`overstayed_claims` takes them): a read that locks nothing,
    for the rescuer's look every poll (almost always: none)."""
    table = domain.table
    condition = or_(lapsed(domain, now), overstayed(domain, now, limits))
    return conn.execute(select(table.c.id).where(condition).limit(1)).first() is not None


def overstayed_claims(
    conn: Connection,
    domain: Domain,
    now: ColumnElement[float],
    limits: Mapping[str, float],
    limit: int,
) -> list[tuple[Claim, str, int, float]]:
    """Claims of running steps that overstayed their stage (:func:`overstayed`):
    ``(claim, stage, attempts, seconds in the stage)`` of up to ``limit`` records, locked
    against other rescuers (PostgreSQL skips locked rows)."""
    table = domain.table
    rows = conn.execute(
        select(
            table.c.id,
            table.c.claim_token,
            table.c.stage,
            table.c.attempts,
            (now - table.c.work_started_at).label("in_stage"),
        )
        .where(overstayed(domain, now, limits))
        .order_by(table.c.id)
        .limit(limit)
        .with_for_update(skip_locked=True)
    ).all()
    return [(Claim(int(r[0]), str(r[1])), str(r[2]), int(r[3]), float(r[4])) for r in rows]


def lapsed_claims(
    conn: Connection, domain: Domain, now: ColumnElement[float], limit: int
) -> list[tuple[Claim, str, int]]:
    """Claims of started steps that lapsed (:func:`lapsed`): ``(claim, stage, attempts)`` of up
    to ``limit`` records, locked against other rescuers (PostgreSQL skips locked rows)."""
    table = domain.table
    rows = conn.execute(
        select(table.c.id, table.c.claim_token, table.c.stage, table.c.attempts)
        .where(lapsed(domain, now))
        .order_by(table.c.id)
        .limit(limit)
        .with_for_update(skip_locked=True)
    ).all()
    return [(Claim(int(r[0]), str(r[1])), str(r[2]), int(r[3])) for r in rows]


def release_claim(
    conn: Connection, domain: Domain, claim: Claim, now: ColumnElement[float]
) -> bool:
    """Give a held claim back so the record is claimable at once (graceful stop)."""
    return release_claims(conn, domain, [claim], now) == 1


def release_claims(
    conn: Connection, domain: Domain, claims: Sequence[Claim], now: ColumnElement[float]
) -> int:
    """Give held claims back (one statement run for many); returns how many still held."""
    if not claims:
        return 0
    table = domain.table
    result = conn.execute(
        update(table)
        .where(table.c.id == bindparam("_id"), table.c.claim_token == bindparam("_token"))
        .values(claim_token=None, claim_expires_at=None, step_started_at=None, updated_at=now),
        [{"_id": c.record_id, "_token": c.token} for c in claims],
    )
    return int(result.rowcount)


def reopen_record(
    conn: Connection, table: Table, record_id: int, *, done: str, to: str, now: ColumnElement[float]
) -> bool:
    """Move an unhalted record at its final stage ``done`` back to ``to``, its queue columns
    as on entry (unclaimed, no failures); False when it is not there (or halted)."""
    moved = conn.execute(
        update(table)
        .where(table.c.id == record_id, table.c.stage == done, table.c.halted_at.is_(None))
        .values(stage=to, state_entered_at=now, attempts=0, updated_at=now)
    ).rowcount
    return bool(moved)


def resume_halted(
    conn: Connection,
    domain: Domain,
    record_id: int,
    now: ColumnElement[float],
    reason: str | None = None,
) -> str | None:
    """Clear every guard of a halted record in one statement (P9).

    With ``reason``, only a record halted for that reason is resumed (a bulk resume acts on
    the set it counted, not on a record that was resumed and halted again for another cause).

    Clears the halt fields, the claim token and expiry, the failure count and the retry pause,
    and re-sets ``state_entered_at``; the stuck countdown starts again at the next claim (D3);
    the stage is kept.

    Returns:
        The stage the record continues from, or None when the record is missing or not halted.
    """
    table = domain.table
    guard = [table.c.id == record_id, table.c.halted_at.is_not(None)]
    if reason is not None:
        guard.append(table.c.halt_reason == reason)
    row = conn.execute(
        update(table)
        .where(*guard)
        .values(
            halted_at=None,
            halt_reason=None,
            halt_error=None,
            claim_token=None,
            claim_expires_at=None,
            step_started_at=None,
            attempts=0,
            retry_at=None,
            state_entered_at=now,
            work_started_at=None,
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
    now: ColumnElement[float] | float,
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


def insert_events(
    conn: Connection,
    rows: Sequence[Mapping[str, Any]],
    now: ColumnElement[float],
    *,
    announce: bool = False,
) -> None:
    """Append several journal rows at once (``domain``, ``record_id``, ``stage``, ``outcome``,
    ``outcome_text``, ``origin`` each), all dated ``now`` (D14).

    Args:
        announce: also tell listening processes, at commit, that work may be claimable
            (PostgreSQL: ``pg_notify`` in the insert's ``RETURNING``, no round trip of its own;
            as :func:`~conveyor.db.notify.announce_work`).
    """
    if not rows:
        return
    announce = announce and conn.dialect.name == "postgresql"
    key = (dialect_key(conn.dialect), id(now), announce)
    cached = _EVENTS.get(key)
    if cached is None or cached[0] is not now:
        if len(_EVENTS) > 64:  # statements of executors long gone
            _EVENTS.clear()
        statement = insert(record_events).values(created_at=now)
        if announce:
            statement = statement.returning(func.pg_notify(CHANNEL, ""))
        cached = _EVENTS[key] = (now, ManyStatement(statement, conn.dialect, _EVENT_KEYS))
    cached[1].run(conn, rows)


_EVENT_KEYS = ("domain", "record_id", "stage", "outcome", "outcome_text", "origin")
_EVENTS: dict[tuple[object, ...], tuple[object, ManyStatement]] = {}


def backlog(
    conn: Connection, domain: Domain, now: ColumnElement[float]
) -> list[tuple[str, int, float]]:
    """Records waiting per non-terminal stage: ``(stage, count, oldest age in seconds)``.

    Waiting: :func:`claimable` (D3: backlog is shown, never halted). The age is measured from
    ``state_entered_at`` on the database's clock (D17).
    """
    table = domain.table
    open_stages = [s.name for s in domain.stages if not s.terminal]
    rows = conn.execute(
        select(table.c.stage, func.count(), func.max(now - table.c.state_entered_at))
        .where(claimable(domain, open_stages, now))
        .group_by(table.c.stage)
    ).all()
    found = {str(r[0]): (int(r[1]), max(0.0, float(r[2] or 0.0))) for r in rows}
    return [(name, *found.get(name, (0, 0.0))) for name in open_stages]


def halted_ids(
    conn: Connection, domain: Domain, *, reason: str | None = None, stage: str | None = None
) -> list[int]:
    """Ids of the domain's halted records, oldest id first, optionally of one halt reason
    and/or one reached stage (the set a bulk resume acts on)."""
    table = domain.table
    query = select(table.c.id).where(table.c.halted_at.is_not(None)).order_by(table.c.id)
    if reason is not None:
        query = query.where(table.c.halt_reason == reason)
    if stage is not None:
        query = query.where(table.c.stage == stage)
    return [int(i) for i in conn.execute(query).scalars()]


def delete_events(conn: Connection, *, domain: str, record_id: int) -> None:
    """Remove a deleted record's journal (D14): an embedded SQLite database may give its id to
    a later record, whose history must not begin with someone else's."""
    conn.execute(
        delete(record_events).where(
            record_events.c.domain == domain, record_events.c.record_id == record_id
        )
    )
