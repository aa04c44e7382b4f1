"""The operator view (admins only): worker processes and lanes (pause, resume, drain), halted
work of every owner, backlog, bulk resume.

Each halted row has its own **Resume** and **Delete…** (a page naming the record and its owner
comes first). The page reloads its sections every few seconds while it is open (a section
being typed in is left alone). A bulk resume happens in two requests. The first freezes the
set — the ids halted now with the reason — and shows how many it holds; the second resumes
exactly those ids (a record halted with that reason after the count is not touched, one
resumed meanwhile is skipped).
"""

from __future__ import annotations

from typing import Annotated, Any
from urllib.parse import urlencode

from fastapi import APIRouter, Depends, Form, Query, Request
from sqlalchemy import Connection
from starlette.responses import RedirectResponse, Response

from conveyor.accounts import SessionAccount
from conveyor.api.state import ApiState, State
from conveyor.audio import queries as audio_queries
from conveyor.audio.deletion import delete_record
from conveyor.clock import iso_utc
from conveyor.error_codes import ErrorCode
from conveyor.errors import Conflict, NotFound, RejectedInput
from conveyor.kinds import MediaKind
from conveyor.limits import LANE_REASON
from conveyor.media import queries as media_queries
from conveyor.media.deletion import delete_item
from conveyor.pipeline import Domain, halted_ids, resume, resume_many
from conveyor.web import queries
from conveyor.web.auth import Csrf, require_admin
from conveyor.web.keyset import cursor_text, parse_cursor
from conveyor.web.pages import render
from conveyor.web.words import duration_words, halt_words, stage_words

__all__ = ["HALTED_PAGE", "router"]

router = APIRouter(include_in_schema=False)

Admin = Annotated[SessionAccount, Depends(require_admin)]
HALTED_PAGE = 100
"""Halted rows a page of the operator view lists per kind of record."""
_MAX_SET = 100_000


def _domain(state: ApiState, name: str) -> Domain:
    if name == "audio":
        return state.runtime.audio
    if name == "media":
        return state.runtime.media
    raise RejectedInput(ErrorCode.INVALID_REQUEST, f"no such kind of record: {name!r}")


@router.get("/operator")
def operator_page(
    request: Request,
    state: State,
    viewer: Admin,
    domain: Annotated[str | None, Query(max_length=16)] = None,
    before: Annotated[str | None, Query(max_length=60)] = None,
    message: Annotated[str | None, Query(max_length=300)] = None,
) -> Response:
    """Backlog per stage, halted totals per reason, the halted of every owner, most recent
    first, :data:`HALTED_PAGE` a page (``?domain=audio&before=`` the cursor of the last row
    shown, keyset)."""
    if domain is not None:
        _domain(state, domain)
    after = parse_cursor(before) if before is not None else None
    runtime = state.runtime
    now = runtime.clock.now()
    sections: list[dict[str, Any]] = []
    with runtime.engine.connect() as conn:
        for name in ("audio", "media"):
            sections.append(_section(conn, state, name, now, after if domain == name else None))
    return render(
        request,
        "operator.html",
        {"sections": sections, "shown": HALTED_PAGE, "message": message, **_cluster(state)},
    )


def _cluster(state: ApiState) -> dict[str, Any]:
    """The worker processes and lanes, for the top of the page."""
    from conveyor.processes import lane_states, list_processes

    runtime = state.runtime
    lost_after = runtime.settings.pipeline.lost_after
    workers = [
        {
            **view.as_json(),
            "seen": duration_words(view.seen_ago),
            "lane_text": ", ".join(
                f"{lane} {view.busy.get(lane, 0)}/{n}" for lane, n in view.lanes.items()
            ),
        }
        for view in list_processes(runtime.engine, runtime.clock, lost_after=lost_after)
    ]
    lanes = lane_states(
        runtime.engine, runtime.clock, known=list(runtime.lanes()), lost_after=lost_after
    )
    return {
        "workers": workers,
        "lanes": [{**vars(s), "since": iso_utc(s.paused_at)} for s in lanes],
    }


@router.post("/operator/lanes")
def operator_lane(
    state: State,
    viewer: Csrf,
    lane: Annotated[str, Form(max_length=50)],
    action: Annotated[str, Form(max_length=10)],
    reason: Annotated[str, Form(max_length=LANE_REASON.longest)] = "",
) -> Response:
    """Pause or resume a lane cluster-wide, then back to the page."""
    from conveyor.processes import pause, resume

    require_admin(viewer)
    runtime = state.runtime
    known = set(runtime.lanes())
    if action == "pause":
        pause(runtime.engine, runtime.clock, lane, known=known, reason=reason.strip() or None)
    elif action == "resume":
        resume(runtime.engine, lane, known=known)
    else:
        raise RejectedInput(ErrorCode.INVALID_REQUEST, f"no such action {action!r}")
    return RedirectResponse("/operator", status_code=303)


@router.post("/operator/drain")
def operator_drain(
    state: State, viewer: Csrf, target: Annotated[str, Form(max_length=255)]
) -> Response:
    """Ask a process (or a host) to drain, then back to the page."""
    from conveyor.processes import drain

    require_admin(viewer)
    drain(state.runtime.engine, state.runtime.clock, target)
    return RedirectResponse("/operator", status_code=303)


def _section(
    conn: Connection, state: ApiState, name: str, now: float, after: tuple[float, int] | None
) -> dict[str, Any]:
    domain = _domain(state, name)
    table = domain.table
    backlog = [
        {
            "stage": b["stage"],
            "words": stage_words(name, str(b["stage"])),
            "waiting": b["waiting"],
            "oldest": duration_words(now - float(b["oldest"])),
        }
        for b in queries.backlog(conn, table, domain.terminal_stages)
    ]
    totals = [
        {"reason": t["halt_reason"], "n": t["n"], "words": halt_words(t["halt_reason"])}
        for t in queries.halted_totals(conn, table)
    ]
    rows = queries.halted_records(conn, table, HALTED_PAGE + 1, after=after)
    halted = [
        {**r, "words": halt_words(r["halt_reason"]), "halted": iso_utc(r["halted_at"])}
        for r in rows[:HALTED_PAGE]
    ]
    older = None
    if len(rows) > HALTED_PAGE:
        last = rows[HALTED_PAGE - 1]
        older = cursor_text(float(last["halted_at"]), int(last["id"]))
    return {
        "domain": name,
        "backlog": backlog,
        "totals": totals,
        "halted": halted,
        "older": older,
        "first_page": after is None,
        "halted_total": sum(int(t["n"]) for t in totals),
    }


@router.post("/operator/freeze")
def operator_freeze(
    request: Request,
    state: State,
    viewer: Csrf,
    domain: Annotated[str, Form(max_length=16)],
    reason: Annotated[str, Form(max_length=64)],
) -> Response:
    """Count the set first: every record halted now with ``reason``; ask to confirm."""
    require_admin(viewer)
    ids = halted_ids(state.runtime.engine, _domain(state, domain), reason=reason)[:_MAX_SET]
    return render(
        request,
        "operator_confirm.html",
        {
            "domain": domain,
            "reason": reason,
            "words": halt_words(reason),
            "ids": ids,
            "id_list": ",".join(str(i) for i in ids),
        },
    )


@router.post("/operator/resume")
def operator_resume(
    request: Request,
    state: State,
    viewer: Csrf,
    domain: Annotated[str, Form(max_length=16)],
    reason: Annotated[str, Form(max_length=64)],
    ids: Annotated[str, Form(max_length=1_200_000)] = "",
) -> Response:
    """Resume exactly the frozen set (the ids of the confirm page), nothing else."""
    require_admin(viewer)
    runtime = state.runtime
    try:
        frozen = [int(x) for x in ids.split(",") if x.strip()]
    except ValueError:
        raise RejectedInput(ErrorCode.INVALID_REQUEST, "the set of ids is malformed") from None
    report = resume_many(runtime.engine, _domain(state, domain), frozen, clock=runtime.clock)
    return render(
        request,
        "operator_done.html",
        {
            "domain": domain,
            "reason": reason,
            "words": halt_words(reason),
            "resumed": len(report.resumed),
            "skipped": len(report.skipped),
        },
    )


def _row(state: ApiState, domain: str, row_id: int) -> tuple[str, str]:
    """``(what, owner)`` of one record or item of any owner: "recording 17 “name”"."""
    with state.runtime.engine.connect() as conn:
        if domain == "audio":
            row = audio_queries.record_by_id(conn, row_id)
            noun = "recording"
            name = None if row is None else (row["title"] or row["original_name"])
        else:
            row = media_queries.item_by_id(conn, row_id)
            noun = "item" if row is None else MediaKind(row["kind"]).noun
            name = None if row is None else row["original_name"]
    if row is None:
        raise NotFound(f"{domain} record {row_id} does not exist")
    return f"{noun} {row_id}" + (f" “{name}”" if name else ""), str(row["owner"])


def _back(message: str) -> Response:
    return RedirectResponse(f"/operator?{urlencode({'message': message})}", status_code=303)


@router.post("/operator/row/resume")
def operator_row_resume(
    state: State,
    viewer: Csrf,
    domain: Annotated[str, Form(max_length=16)],
    row_id: Annotated[int, Form(ge=1, le=2**31 - 1, alias="id")],
) -> Response:
    """Resume one halted record or item of any owner (P9), back to the page with a line."""
    require_admin(viewer)
    runtime = state.runtime
    what, owner = _row(state, domain, row_id)
    try:
        resume(runtime.engine, _domain(state, domain), row_id, clock=runtime.clock)
    except Conflict:
        return _back(f"The {what} of {owner} is not halted any more.")
    return _back(f"Resumed the {what} of {owner}.")


@router.post("/operator/row/delete")
def operator_row_delete(
    request: Request,
    state: State,
    viewer: Csrf,
    domain: Annotated[str, Form(max_length=16)],
    row_id: Annotated[int, Form(ge=1, le=2**31 - 1, alias="id")],
    confirmed: Annotated[str, Form(max_length=3)] = "",
) -> Response:
    """Delete one record or item of any owner: first a page naming it and its owner, then,
    with ``confirmed=yes``, gone for good (as ``DELETE`` in the API)."""
    require_admin(viewer)
    runtime = state.runtime
    _domain(state, domain)
    what, owner = _row(state, domain, row_id)
    if confirmed != "yes":
        return render(
            request,
            "confirm_delete.html",
            {
                "title": f"Delete the {what} of {owner}?",
                "lines": [
                    f"It goes for {owner} too: its files, texts and history. Resuming it "
                    "instead keeps everything."
                ],
                "names": [],
                "action": "/operator/row/delete",
                "back": "/operator",
                "fields": [("domain", domain), ("id", str(row_id)), ("confirmed", "yes")],
            },
        )
    if domain == "audio":
        delete_record(runtime.engine, runtime.store, runtime.clock, row_id)
    else:
        delete_item(runtime.engine, runtime.store, runtime.clock, row_id)
    runtime.notifier.publish()
    return _back(f"Deleted the {what} of {owner}.")
