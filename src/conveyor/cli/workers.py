"""``conveyor workers …`` (the worker processes: list, show, drain) and ``conveyor lanes …``
(list, pause, resume): what runs across the cluster, and the two controls that span it."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer

from conveyor.cli.exits import ExitCode
from conveyor.cli.groups import CommandGroup
from conveyor.cli.ids import IdParser
from conveyor.cli.output import console, fail, note, print_json, table
from conveyor.cli.texts import TextParser
from conveyor.limits import LANE_REASON

if TYPE_CHECKING:
    from conveyor.processes import ProcessView
    from conveyor.runtime import Runtime

__all__ = ["lanes_app", "workers_app"]

workers_app = CommandGroup(help="Worker processes across the cluster: list, show, drain.")
lanes_app = CommandGroup(help="Lanes across the cluster: list, pause, resume.")

_JSON = typer.Option("--json", help="Print JSON.")


def _runtime() -> Runtime:
    from conveyor.cli.settings import make_runtime

    return make_runtime()


def _lanes(view: ProcessView, counts: dict[str, int]) -> str:
    return ", ".join(f"{lane} {counts.get(lane, 0)}/{n}" for lane, n in view.lanes.items())


def _ago(value: float) -> str:
    return f"{value:.0f} s ago" if value < 120 else f"{value / 60:.0f} min ago"


def _lanes_cell(view: ProcessView) -> str:
    """``short=2/2,long=1/1``: each lane's busy/threads as one word, for a table column."""
    return ",".join(f"{lane}={view.busy.get(lane, 0)}/{n}" for lane, n in view.lanes.items())


def _ago_cell(value: float) -> str:
    """``3s`` or ``14min`` ago: one word, for a table column."""
    return f"{value:.0f}s" if value < 120 else f"{value / 60:.0f}min"


@workers_app.command("list")
def workers_list(
    stopped: Annotated[
        bool, typer.Option("--stopped", help="Also list processes stopped in the last hour.")
    ] = False,
    as_json: Annotated[bool, _JSON] = False,
) -> None:
    """List the worker processes (live, draining and lost): host, pid, version, lanes with
    busy/threads, started, last seen, claims held."""
    from conveyor.clock import iso_utc
    from conveyor.processes import list_processes

    runtime = _runtime()
    views = list_processes(
        runtime.engine,
        runtime.clock,
        lost_after=runtime.settings.pipeline.lost_after,
        stopped_within=3600.0 if stopped else None,
    )
    if as_json:
        print_json([v.as_json() for v in views])
        return
    if not views:
        note("no worker process has registered (start one with `conveyor worker`)")
        return
    # One word per header and cell, as every table: `awk` counts the same columns on each row.
    rows = table("id", "state", "host", "pid", "version", "lanes", "started", "seen", "holds")
    for v in views:
        rows.add_row(
            str(v.id),
            v.state,
            v.host,
            str(v.pid),
            v.version,
            _lanes_cell(v),
            iso_utc(v.started_at) or "",
            _ago_cell(v.seen_ago),
            str(len(v.holding)),
        )
    console.print(rows)


@workers_app.command("show")
def workers_show(
    process_id: Annotated[
        int,
        typer.Argument(metavar="ID", help="The process's id.", parser=IdParser("WORKER")),
    ],
    as_json: Annotated[bool, _JSON] = False,
) -> None:
    """Show one worker process and every record it holds (domain, id, stage, since when)."""
    from conveyor.clock import iso_utc
    from conveyor.errors import NotFound
    from conveyor.processes import show_process

    runtime = _runtime()
    try:
        view = show_process(
            runtime.engine,
            runtime.clock,
            process_id,
            lost_after=runtime.settings.pipeline.lost_after,
        )
    except NotFound as exc:
        raise fail(str(exc), ExitCode.NOT_FOUND) from None
    if as_json:
        print_json(view.as_json())
        return
    console.print(f"process    {view.id} ({view.state})")
    console.print(f"host, pid  {view.host} {view.pid}")
    console.print(f"version    {view.version}")
    console.print(f"lanes      {_lanes(view, view.busy)} (busy/threads)")
    console.print(f"started    {iso_utc(view.started_at)}")
    console.print(f"last seen  {iso_utc(view.last_seen_at)} ({_ago(view.seen_ago)})")
    if view.drain_requested_at is not None:
        console.print(f"drain      asked {iso_utc(view.drain_requested_at)}")
    if view.stopped_at is not None:
        console.print(f"stopped    {iso_utc(view.stopped_at)}")
    if not view.holding:
        console.print("holds      nothing")
        return
    rows = table("domain", "id", "stage", "since")
    for held in view.holding:
        rows.add_row(held.domain, str(held.record_id), held.stage or "", iso_utc(held.since) or "")
    console.print(rows)


@workers_app.command("drain")
def workers_drain(
    target: Annotated[
        str,
        typer.Argument(
            metavar="HOST|ID", help="A process id, or a host name (every process on it)."
        ),
    ],
    as_json: Annotated[bool, _JSON] = False,
) -> None:
    """Ask processes to drain: they stop claiming within a poll, let their running steps
    finish and exit 0 (conveyor serve keeps serving the API)."""
    from conveyor.errors import NotFound
    from conveyor.processes import drain

    runtime = _runtime()
    try:
        asked = drain(runtime.engine, runtime.clock, target)
    except NotFound as exc:
        raise fail(str(exc), ExitCode.NOT_FOUND) from None
    if as_json:
        print_json({"draining": asked})
        return
    console.print(f"draining {', '.join(map(str, asked))}")
    note("`conveyor workers list` shows them until they exit")


@lanes_app.command("list")
def lanes_list(as_json: Annotated[bool, _JSON] = False) -> None:
    """List the lanes: paused or not, worker threads and busy ones in live processes."""
    from conveyor.clock import iso_utc
    from conveyor.processes import lane_states

    runtime = _runtime()
    states = lane_states(
        runtime.engine,
        runtime.clock,
        known=list(runtime.lanes()),
        lost_after=runtime.settings.pipeline.lost_after,
    )
    if as_json:
        print_json(
            [
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
        )
        return
    rows = table("lane", "state", "workers", "busy", "paused_since", "reason")
    for s in states:
        rows.add_row(
            s.lane,
            "paused" if s.paused_at is not None else "running",
            str(s.workers),
            str(s.busy),
            iso_utc(s.paused_at) or "",
            s.reason or "",
        )
    console.print(rows)


@lanes_app.command("pause")
def lanes_pause(
    lane: Annotated[str, typer.Argument(metavar="LANE", help="audio, short or long.")],
    reason: Annotated[
        str | None,
        typer.Option(
            metavar="TEXT",
            help=f"Why, for the others (shown in lists); {LANE_REASON.rule}.",
            parser=TextParser(LANE_REASON),
        ),
    ] = None,
    as_json: Annotated[bool, _JSON] = False,
) -> None:
    """Pause a lane on every host: no process claims for it from its next poll on; running
    steps finish; uploads are still accepted and wait."""
    from conveyor.errors import RejectedInput
    from conveyor.processes import pause

    runtime = _runtime()
    try:
        changed = pause(
            runtime.engine, runtime.clock, lane, known=set(runtime.lanes()), reason=reason
        )
    except RejectedInput as exc:
        raise fail(str(exc), ExitCode.USAGE) from None
    if as_json:
        print_json({"lane": lane.strip(), "paused": True, "changed": changed})
        return
    console.print(f"lane {lane.strip()} paused" if changed else f"lane {lane.strip()} was paused")


@lanes_app.command("resume")
def lanes_resume(
    lane: Annotated[str, typer.Argument(metavar="LANE", help="audio, short or long.")],
    as_json: Annotated[bool, _JSON] = False,
) -> None:
    """Resume a paused lane on every host (from each process's next poll on)."""
    from conveyor.errors import RejectedInput
    from conveyor.processes import resume

    runtime = _runtime()
    try:
        changed = resume(runtime.engine, lane, known=set(runtime.lanes()))
    except RejectedInput as exc:
        raise fail(str(exc), ExitCode.USAGE) from None
    if as_json:
        print_json({"lane": lane.strip(), "paused": False, "changed": changed})
        return
    console.print(
        f"lane {lane.strip()} resumed" if changed else f"lane {lane.strip()} was not paused"
    )
