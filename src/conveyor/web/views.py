"""What a page shows of a record or an item: stage in words, time in stage, place in its lane's
queue (or that it is being worked on, or waits to retry)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from typing import Any

from sqlalchemy import Connection, RowMapping

from conveyor.audio.cards import provider_wait, provider_waits
from conveyor.clock import iso_utc, local_words
from conveyor.db.keyset import order_terms
from conveyor.errors import NotFound
from conveyor.kinds import MediaKind
from conveyor.media import albums as album_views
from conveyor.media import queries as media_queries
from conveyor.pipeline import Domain
from conveyor.pipeline.queries import claim_order
from conveyor.pipeline.status import RecordState, status_of
from conveyor.web import queries
from conveyor.web.words import duration_words, halt_words, resume_helps, stage_words

__all__ = [
    "LINK_HIDDEN",
    "item_status",
    "item_statuses",
    "link_shown",
    "record_status",
    "record_statuses",
]

#: What a link's holder is not told, on its pages and in its album's stream alike (both through
#: :func:`link_shown`): why an item halted. Its reason and error text can carry file names and
#: provider errors, and the reason's words speak to the owner; the holder sees that it halted.
#: Named as an ``item.halted`` event's payload names them (a row's ``halt_reason`` and
#: ``halt_error``).
LINK_HIDDEN = frozenset({"reason", "error"})


def link_shown(detail: Mapping[str, Any]) -> dict[str, Any]:
    """``detail`` as a link's holder is told it: without the keys :data:`LINK_HIDDEN` names.

    Args:
        detail: an album event's payload, or a halt's ``reason`` and ``error``.
    """
    return {key: value for key, value in detail.items() if key not in LINK_HIDDEN}


def _progress(
    conn: Connection,
    row: RowMapping,
    domain: Domain,
    now: float,
    *,
    count_place: bool = True,
    link: bool = False,
) -> dict[str, Any]:
    """Stage, halt, time in stage and place in its lane's queue of a record or item row
    (``count_place=False``: the place is left for :func:`_fill_places`; ``link``: for a link's
    holder, the halt's words those of what :func:`link_shown` leaves of it)."""
    status = status_of(row, domain, now)
    halted, done = status.state is RecordState.HALTED, status.terminal
    working, retrying = status.state is RecordState.WORKING, status.state is RecordState.RETRYING
    waiting = status.state is RecordState.WAITING
    retry_at = status.retry_at
    place: int | None = None
    if waiting and count_place:
        place = queries.place_in_queue(conn, domain, row, now)
    entered = float(row["state_entered_at"])
    halt = {"reason": row["halt_reason"], "error": row["halt_error"]}
    if link:
        halt = link_shown(halt)
    reason = halt.get("reason")
    return {
        "stage": row["stage"],
        "stage_words": stage_words(domain.name, str(row["stage"])),
        "done": done,
        "halted": halted,
        "halt_reason": reason,
        "halt_words": halt_words(reason) if halted else "",
        "resume_helps": resume_helps(reason) if halted else True,
        "halt_error": halt.get("error"),
        "working": working,
        "waiting": waiting,
        "place": place,
        "retrying": retrying,
        "attempts": int(row["attempts"] or 0),
        "retry_in": duration_words(max(1.0, retry_at - now)) if retry_at is not None else "",
        "retry_at": iso_utc(retry_at) if retry_at is not None else None,
        "stage_entered_at": iso_utc(entered),
        "time_in_stage": duration_words(now - entered),
    }


def _record(
    conn: Connection, domain: Domain, row: RowMapping, now: float, *, count_place: bool = True
) -> dict[str, Any]:
    return {
        "id": row["id"],
        "title": row["title"],
        "brief": row["brief"],
        "name": row["title"] or row["original_name"] or f"Recording {row['id']}",
        "original_name": row["original_name"],
        "created_at": iso_utc(row["created_at"]),
        "duration": duration_words(row["duration"]) if row["duration"] else "",
        "no_speech": bool(row["no_speech"]),
        "language": row["detected_language"] or row["language"],
        **_progress(conn, row, domain, now, count_place=count_place),
    }


def record_status(conn: Connection, domain: Domain, row: RowMapping, now: float) -> dict[str, Any]:
    """A record as the pages show it: its card fields plus progress in plain words, and
    ``provider_wait`` (the card's: why it waits on its provider, or ``None``)."""
    return {**_record(conn, domain, row, now), "provider_wait": provider_wait(conn, row)}


def _item(
    conn: Connection,
    domain: Domain,
    row: RowMapping,
    roles: dict[str, dict[str, Any]],
    now: float,
    *,
    count_place: bool = True,
    base: str = "",
    link: bool = False,
) -> dict[str, Any]:
    # The API's item view (one function for both), from a row already read.
    view = album_views.view_of(row, roles)
    kind = MediaKind(row["kind"])
    return {
        **view,
        # What the templates do differently for its kind, asked of the kind (kinds.KindTraits).
        "noun": kind.noun,
        "plays": kind.plays,
        "poster": kind.poster,
        # ``base``: where the page lives, "" or a link's ``/s/<token>``.
        "urls": {role: f"{base}/files/{obj['key']}" for role, obj in roles.items()},
        "name": row["original_name"] or f"Item {row['id']}",
        "captured_words": local_words(row["captured_at"], row["captured_offset"]),
        # The grid's order (media.queries.TAKEN_AT), for placing a tile that arrives live.
        "taken_at": row["captured_at"] if row["captured_at"] is not None else row["uploaded_at"],
        **_progress(conn, row, domain, now, count_place=count_place, link=link),
    }


def item_status(
    conn: Connection,
    domain: Domain,
    item_id: int,
    owner: str | None,
    now: float,
    *,
    base: str = "",
    link: bool = False,
) -> dict[str, Any]:
    """An item as the pages show it: its roles (M2), kind, and progress in plain words.

    Args:
        owner: only an item of this owner (None: the caller checked who may see it).
        base: the prefix of its file URLs (a link's pages: ``/s/<token>``).
        link: for a link's holder (no account): whether it is halted, not why
            (:data:`LINK_HIDDEN`: ``halt_reason`` and ``halt_error`` None, ``halt_words``
            those of no reason).

    Raises:
        NotFound: no such item of ``owner``.
    """
    row = media_queries.item_by_id(conn, item_id, owner)
    if row is None:
        raise NotFound(f"item {item_id} does not exist")
    roles = album_views.roles_of(conn, item_id)
    return _item(conn, domain, row, roles, now, base=base, link=link)


def _fill_places(
    conn: Connection, domain: Domain, shown: Sequence[tuple[RowMapping, dict[str, Any]]], now: float
) -> None:
    """The places of many rows of one page: per lane, in claim order. A row later in the
    claim order waits behind everything an earlier one does, and that one too, so once one
    place is past :data:`~conveyor.web.queries.PLACE_LIMIT` the rest are without counting (a
    page at the back of a long queue costs one count, not one per row)."""
    order = order_terms(claim_order(domain))

    def claim_key(row: RowMapping) -> tuple[float, ...]:
        return tuple(
            -float(row[str(c.name)]) if desc else float(row[str(c.name)]) for c, desc in order
        )

    lanes: dict[str, list[tuple[RowMapping, dict[str, Any]]]] = defaultdict(list)
    for row, status in shown:
        if status["waiting"]:
            lanes[domain.stage(str(row["stage"])).lane].append((row, status))
    for waiting in lanes.values():
        waiting.sort(key=lambda pair: claim_key(pair[0]))
        beyond = False
        for row, status in waiting:
            place = queries.PLACE_LIMIT + 1
            if not beyond:
                place = queries.place_in_queue(conn, domain, row, now)
            status["place"] = place
            beyond = place > queries.PLACE_LIMIT


def record_statuses(
    conn: Connection, domain: Domain, rows: Sequence[RowMapping], now: float
) -> list[dict[str, Any]]:
    """:func:`record_status` of many rows (a page of the list), places counted together and
    the provider waits read together."""
    waits = provider_waits(conn, rows)
    shown = [
        (
            row,
            {
                **_record(conn, domain, row, now, count_place=False),
                "provider_wait": waits.get(int(row["id"])),
            },
        )
        for row in rows
    ]
    _fill_places(conn, domain, shown, now)
    return [status for _, status in shown]


def item_statuses(
    conn: Connection,
    domain: Domain,
    rows: Sequence[RowMapping],
    now: float,
    *,
    base: str = "",
    link: bool = False,
) -> list[dict[str, Any]]:
    """:func:`item_status` of many item rows (a page of the grid): their objects read in one
    query, places counted together."""
    roles = queries.roles_of_items(conn, [int(r["id"]) for r in rows])
    shown = [
        (
            row,
            _item(
                conn,
                domain,
                row,
                roles.get(int(row["id"]), {}),
                now,
                count_place=False,
                base=base,
                link=link,
            ),
        )
        for row in rows
    ]
    _fill_places(conn, domain, shown, now)
    return [status for _, status in shown]
