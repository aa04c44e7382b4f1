"""The web app's own reads: queue places, record changes of an owner, the operator's totals."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import (
    ColumnElement,
    Connection,
    Double,
    RowMapping,
    Table,
    and_,
    case,
    func,
    literal,
    or_,
    select,
)

from conveyor.clock import seconds
from conveyor.db.keyset import comes_after, comes_before, order_terms
from conveyor.db.tables import audio_records, files, media_items, media_objects, record_events
from conveyor.media.queries import TAKEN_AT
from conveyor.pipeline import Domain
from conveyor.pipeline.queries import claim_order, claimable

__all__ = [
    "PLACE_LIMIT",
    "RECORD_STATES",
    "album_neighbours",
    "album_page",
    "audio_events_after",
    "backlog",
    "count_items",
    "files_size",
    "halted_records",
    "halted_totals",
    "items_size",
    "latest_audio_event_id",
    "newest_item_id",
    "place_in_queue",
    "record_counts",
    "records_page",
    "roles_of_items",
]


PLACE_LIMIT = 1000
"""Places in a queue are counted up to this many; beyond it a page says "over 1,000"."""


def place_in_queue(conn: Connection, domain: Domain, row: RowMapping, now: float) -> int:
    """How many records the workers of this record's lane will claim before it (0 = next).

    The lane's workers claim from every stage of the lane (audio: all four stages of a
    recording; media: ``uploaded`` in the short lane, ``transcoding`` in the long one) in the
    engine's claim order (records begun in their stage first, D19; then
    :func:`conveyor.pipeline.queries.claim_order`: audio oldest first, media newest upload
    first, the id breaking ties). Counted: records sorted before this one that a claim could
    take now (:func:`conveyor.pipeline.queries.claimable`) — not those being worked on, nor
    those in a retry pause. Counting stops past :data:`PLACE_LIMIT`
    (a page of 50 records deep in a long queue stays fast): ``PLACE_LIMIT + 1`` means "more".
    """
    table = domain.table
    stages = [s.name for s in domain.lane_stages(domain.stage(str(row["stage"])).lane)]
    order = order_terms(claim_order(domain))
    values = [row[str(column.name)] for column, _ in order]
    sooner = comes_before(order, values)
    begun = table.c.work_started_at.is_not(None)
    # D19: records already begun in their stage are claimed before those not begun.
    before = and_(begun, sooner) if row.get("work_started_at") is not None else or_(begun, sooner)
    ahead = (
        select(table.c.id)
        .where(claimable(domain, stages, literal(now, Double())), before)
        .limit(PLACE_LIMIT + 1)
        .subquery()
    )
    query = select(func.count()).select_from(ahead)
    return int(conn.execute(query).scalar_one())


RECORD_STATES = ("waiting", "done", "halted")
"""The list's state filter: in progress (not halted, not done), done, halted."""


def _state_filter(table: Table, state: str) -> ColumnElement[bool]:
    if state == "halted":
        return table.c.halted_at.is_not(None)
    if state == "done":
        return and_(table.c.halted_at.is_(None), table.c.stage == "done")
    if state == "waiting":
        return and_(table.c.halted_at.is_(None), table.c.stage != "done")
    raise ValueError(state)


def record_counts(conn: Connection, owner: str) -> dict[str, int]:
    """``owner``'s records: ``total`` and how many are ``waiting``, ``done``, ``halted``."""
    table = audio_records
    row = conn.execute(
        select(
            func.count().label("total"),
            *(
                func.coalesce(func.sum(case((_state_filter(table, s), 1), else_=0)), 0).label(s)
                for s in RECORD_STATES
            ),
        ).where(table.c.owner == owner)
    ).one()
    return {k: int(v) for k, v in row._mapping.items()}


def records_page(
    conn: Connection,
    owner: str,
    *,
    state: str | None,
    stage: str | None,
    before: int | None,
    limit: int,
) -> Sequence[RowMapping]:
    """``owner``'s records newest first (by id), filtered by ``state`` (one of
    :data:`RECORD_STATES`) and ``stage``, continuing below the id ``before``."""
    table = audio_records
    query = select(table).where(table.c.owner == owner).order_by(table.c.id.desc()).limit(limit)
    if state is not None:
        query = query.where(_state_filter(table, state))
    if stage is not None:
        query = query.where(table.c.stage == stage)
    if before is not None:
        query = query.where(table.c.id < before)
    return conn.execute(query).mappings().all()


def count_items(conn: Connection, album_id: int) -> int:
    """How many items the album holds."""
    query = select(func.count()).select_from(media_items).where(media_items.c.album_id == album_id)
    return int(conn.execute(query).scalar_one())


def newest_item_id(conn: Connection, album_id: int) -> int:
    """The largest item id of the album (0 if empty): a tile arriving live with a larger id
    is a new upload, one with a smaller id an item shown on another page."""
    query = select(func.max(media_items.c.id)).where(media_items.c.album_id == album_id)
    return int(conn.execute(query).scalar() or 0)


def files_size(conn: Connection, file_ids: Sequence[int] | set[int]) -> int:
    """Bytes of the given ``files`` rows together."""
    if not file_ids:
        return 0
    query = select(func.coalesce(func.sum(files.c.size), 0)).where(files.c.id.in_(file_ids))
    return int(conn.execute(query).scalar_one())


def items_size(conn: Connection, item_ids: Sequence[int]) -> int:
    """Bytes of every object of the given items (originals and variants)."""
    if not item_ids:
        return 0
    query = (
        select(func.coalesce(func.sum(files.c.size), 0))
        .select_from(media_objects.join(files, files.c.id == media_objects.c.file_id))
        .where(media_objects.c.item_id.in_(item_ids))
    )
    return int(conn.execute(query).scalar_one())


def audio_events_after(
    conn: Connection, owner: str, after_id: int, limit: int, record_id: int | None = None
) -> Sequence[RowMapping]:
    """Journal rows (D14) of ``owner``'s records after ``after_id``, oldest first."""
    query = (
        select(record_events)
        .join(audio_records, audio_records.c.id == record_events.c.record_id)
        .where(
            record_events.c.domain == "audio",
            record_events.c.id > after_id,
            audio_records.c.owner == owner,
        )
        .order_by(record_events.c.id)
        .limit(limit)
    )
    if record_id is not None:
        query = query.where(record_events.c.record_id == record_id)
    return conn.execute(query).mappings().all()


def latest_audio_event_id(conn: Connection) -> int:
    """The newest journal id of any audio record (0 when none): a stream starts after it."""
    query = select(func.max(record_events.c.id)).where(record_events.c.domain == "audio")
    return int(conn.execute(query).scalar_one() or 0)


def backlog(conn: Connection, table: Table, terminal: Sequence[str]) -> Sequence[RowMapping]:
    """Unhalted records waiting per stage: ``stage``, ``waiting``, ``oldest`` (epoch s of the
    longest wait)."""
    query = (
        select(
            table.c.stage,
            func.count().label("waiting"),
            func.min(table.c.state_entered_at).label("oldest"),
        )
        .where(table.c.halted_at.is_(None), table.c.stage.not_in(list(terminal)))
        .group_by(table.c.stage)
    )
    return conn.execute(query).mappings().all()


def halted_totals(conn: Connection, table: Table) -> Sequence[RowMapping]:
    """Halted records per reason: ``halt_reason``, ``n``."""
    query = (
        select(table.c.halt_reason, func.count().label("n"))
        .where(table.c.halted_at.is_not(None))
        .group_by(table.c.halt_reason)
        .order_by(table.c.halt_reason)
    )
    return conn.execute(query).mappings().all()


def album_page(
    conn: Connection, album_id: int, *, after: tuple[float, int] | None, limit: int
) -> Sequence[RowMapping]:
    """Up to ``limit`` items of an album, newest capture first (:data:`TAKEN_AT`, upload time
    where unknown; id breaks ties) each with its ``taken_at``, after the ``(taken_at, id)`` of
    the last item of the previous page."""
    order = [(TAKEN_AT, True), (media_items.c.id, True)]
    query = (
        select(media_items, TAKEN_AT.label("taken_at"))
        .where(media_items.c.album_id == album_id)
        .order_by(TAKEN_AT.desc(), media_items.c.id.desc())
        .limit(limit)
    )
    if after is not None:
        query = query.where(comes_after(order, after))
    return conn.execute(query).mappings().all()


def album_neighbours(conn: Connection, item: RowMapping) -> tuple[int | None, int | None]:
    """The ids of the items just before (taken later) and just after (taken earlier) ``item``
    in its album's grid order (:func:`album_page`'s); None at either end."""
    order = [(TAKEN_AT, True), (media_items.c.id, True)]
    taken = item["captured_at"] if item["captured_at"] is not None else item["uploaded_at"]
    at = (float(taken), int(item["id"]))
    base = select(media_items.c.id).where(media_items.c.album_id == item["album_id"])
    older = conn.execute(
        base.where(comes_after(order, at))
        .order_by(TAKEN_AT.desc(), media_items.c.id.desc())
        .limit(1)
    ).scalar()
    newer = conn.execute(
        base.where(comes_before(order, at))
        .order_by(TAKEN_AT.asc(), media_items.c.id.asc())
        .limit(1)
    ).scalar()
    return newer, older


def halted_records(
    conn: Connection, table: Table, limit: int, *, after: tuple[float, int] | None = None
) -> Sequence[RowMapping]:
    """Halted records of every owner, most recently halted first (id breaks ties), after the
    ``(halted_at, id)`` of the last one of the previous page."""
    query = (
        select(
            table.c.id,
            table.c.owner,
            table.c.stage,
            table.c.halt_reason,
            table.c.halt_error,
            table.c.halted_at,
        )
        .where(table.c.halted_at.is_not(None))
        .order_by(table.c.halted_at.desc(), table.c.id.desc())
        .limit(limit)
    )
    if after is not None:
        order = [(table.c.halted_at, True), (table.c.id, True)]
        query = query.where(comes_after(order, after))
    return conn.execute(query).mappings().all()


def roles_of_items(
    conn: Connection, item_ids: Sequence[int]
) -> dict[int, dict[str, dict[str, Any]]]:
    """The objects of many items by role, in one query: item id → role → ``key``,
    ``mime_type``, ``size``, ``width``, ``height``, ``duration`` (as
    :func:`conveyor.media.albums.roles_of` gives them for one item)."""
    if not item_ids:
        return {}
    query = (
        select(
            media_objects.c.item_id,
            media_objects.c.role,
            files.c.key,
            files.c.mime_type,
            files.c.size,
            files.c.width,
            files.c.height,
            files.c.duration,
        )
        .join(files, files.c.id == media_objects.c.file_id)
        .where(media_objects.c.item_id.in_(list(item_ids)))
        .order_by(media_objects.c.item_id, media_objects.c.role)
    )
    found: dict[int, dict[str, dict[str, Any]]] = {}
    for o in conn.execute(query).mappings():
        found.setdefault(int(o["item_id"]), {})[str(o["role"])] = {
            "key": o["key"],
            "mime_type": o["mime_type"],
            "size": o["size"],
            "width": o["width"],
            "height": o["height"],
            "duration": seconds(o["duration"]),
        }
    return found
