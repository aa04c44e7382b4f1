"""``/api/admin``: the worker processes and lanes of the cluster, for administrators (users
added with ``--admin``): list processes and what each holds, drain one or a host, pause and
resume lanes. Another user's token gets 403."""

from __future__ import annotations

from typing import Annotated, Any

import anyio.to_thread
from fastapi import APIRouter, Depends, Query

from conveyor.api.auth import Owner
from conveyor.api.errors import ApiError
from conveyor.api.schemas import ErrorBody
from conveyor.api.state import State
from conveyor.clock import iso_utc
from conveyor.error_codes import ErrorCode
from conveyor.limits import LANE_REASON

__all__ = ["router"]


async def _admin(state: State, owner: Owner) -> None:
    from conveyor.accounts import is_admin

    if not await anyio.to_thread.run_sync(is_admin, state.runtime.engine, owner.name):
        raise ApiError(ErrorCode.FORBIDDEN, "only an administrator may see or steer the workers")


router = APIRouter(prefix="/api/admin", tags=["operations"], dependencies=[Depends(_admin)])

_REFUSALS: dict[int | str, dict[str, Any]] = {
    401: {"model": ErrorBody, "description": "No or unknown bearer token."},
    403: {"model": ErrorBody, "description": "The token's user is not an administrator."},
}


@router.get("/workers", summary="Worker processes", responses=_REFUSALS)
def list_workers(state: State, stopped: bool = False) -> dict[str, Any]:
    """Every live worker process (running, draining, lost) — host, pid, version, lanes, busy
    threads, started, last seen (the database's clock), the records it holds — and with
    `stopped=true` those stopped in the last hour. `conveyor workers list --json` shapes."""
    from conveyor.processes import list_processes

    runtime = state.runtime
    views = list_processes(
        runtime.engine,
        runtime.clock,
        lost_after=runtime.settings.pipeline.lost_after,
        stopped_within=3600.0 if stopped else None,
    )
    return {"workers": [v.as_json() for v in views]}


@router.post(
    "/workers/{target}/drain",
    summary="Drain a process or a host",
    responses={**_REFUSALS, 404: {"model": ErrorBody, "description": "No such running process."}},
)
def drain_workers(state: State, target: str) -> dict[str, Any]:
    """Ask a process (`target` an id) or every running process of a host (`target` its name) to
    stop claiming, finish its running steps and exit."""
    from conveyor.processes import drain

    return {"draining": drain(state.runtime.engine, state.runtime.clock, target)}


@router.get("/lanes", summary="Lanes", responses=_REFUSALS)
def list_lanes(state: State) -> dict[str, Any]:
    """Every lane: paused or not (since when, why), worker threads and busy ones."""
    from conveyor.processes import lane_states

    runtime = state.runtime
    states = lane_states(
        runtime.engine,
        runtime.clock,
        known=list(runtime.lanes()),
        lost_after=runtime.settings.pipeline.lost_after,
    )
    return {
        "lanes": [
            {
                "lane": s.lane,
                "paused": s.paused_at is not None,
                "paused_at": iso_utc(s.paused_at),
                "reason": s.reason,
                "workers": s.workers,
                "busy": s.busy,
            }
            for s in states
        ]
    }


@router.post(
    "/lanes/{lane}/pause",
    summary="Pause a lane cluster-wide",
    responses={**_REFUSALS, 422: {"model": ErrorBody, "description": "No such lane."}},
)
def pause_lane(
    state: State,
    lane: str,
    reason: Annotated[
        str | None,
        Query(max_length=LANE_REASON.longest, pattern=LANE_REASON.pattern),
    ] = None,
) -> dict[str, Any]:
    """No process claims for `lane` from its next poll on; running steps finish."""
    from conveyor.processes import pause

    runtime = state.runtime
    changed = pause(runtime.engine, runtime.clock, lane, known=set(runtime.lanes()), reason=reason)
    return {"lane": lane, "paused": True, "changed": changed}


@router.post(
    "/lanes/{lane}/resume",
    summary="Resume a lane cluster-wide",
    responses={**_REFUSALS, 422: {"model": ErrorBody, "description": "No such lane."}},
)
def resume_lane(state: State, lane: str) -> dict[str, Any]:
    """Processes claim for `lane` again from their next poll on."""
    from conveyor.processes import resume

    runtime = state.runtime
    changed = resume(runtime.engine, lane, known=set(runtime.lanes()))
    return {"lane": lane, "paused": False, "changed": changed}
