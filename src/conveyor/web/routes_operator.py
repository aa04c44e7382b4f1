"""The operator view (admins only): halted work of every owner, backlog, bulk resume.

A bulk resume happens in two requests. The first freezes the set — the ids halted now with
the reason — and shows how many it holds; the second resumes exactly those ids (a record
halted with that reason after the count is not touched, one resumed meanwhile is skipped).
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Form, Request
from starlette.responses import Response

from conveyor.accounts import SessionAccount
from conveyor.api.state import ApiState, State
from conveyor.clock import iso_utc
from conveyor.errors import RejectedInput
from conveyor.pipeline import Domain, halted_ids, resume_many
from conveyor.web import queries
from conveyor.web.auth import Csrf, require_admin
from conveyor.web.pages import render
from conveyor.web.words import duration_words, halt_words, stage_words

__all__ = ["router"]

router = APIRouter(include_in_schema=False)

Admin = Annotated[SessionAccount, Depends(require_admin)]
_SHOWN = 200
_MAX_SET = 100_000


def _domain(state: ApiState, name: str) -> Domain:
    if name == "audio":
        return state.runtime.audio
    if name == "media":
        return state.runtime.media
    raise RejectedInput("invalid_request", f"no such kind of record: {name!r}")


@router.get("/operator")
def operator_page(request: Request, state: State, viewer: Admin) -> Response:
    """Backlog per stage, halted totals per reason, the latest halted of every owner."""
    runtime = state.runtime
    now = runtime.clock.now()
    sections: list[dict[str, Any]] = []
    with runtime.engine.connect() as conn:
        for name in ("audio", "media"):
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
            halted = [
                {
                    **r,
                    "words": halt_words(r["halt_reason"]),
                    "halted": iso_utc(r["halted_at"]),
                }
                for r in queries.halted_records(conn, table, _SHOWN)
            ]
            sections.append(
                {"domain": name, "backlog": backlog, "totals": totals, "halted": halted}
            )
    return render(request, "operator.html", {"sections": sections, "shown": _SHOWN})


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
        raise RejectedInput("invalid_request", "the set of ids is malformed") from None
    report = resume_many(runtime.engine, _domain(state, domain), frozen, clock=runtime.clock)
    runtime.notifier.publish()
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
