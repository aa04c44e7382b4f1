"""``conveyor albums …`` and ``conveyor media …``: photo and video albums from the shell."""

from __future__ import annotations

import json
import logging
import time
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table

from conveyor.cli.common import (
    accept_files,
    console,
    err_console,
    fail,
    make_runtime,
    progress_display,
    setup_logging,
    stop_on_signals,
)
from conveyor.errors import Conflict, NotFound, RejectedInput
from conveyor.media import albums as album_views
from conveyor.media import queries
from conveyor.media.broadcast import AlbumBroadcast
from conveyor.media.domain import LONG_LANE, SHORT_LANE
from conveyor.media.intake import accept_media
from conveyor.pipeline import resume as resume_record

__all__ = ["albums_app", "media_app", "print_item"]

albums_app = typer.Typer(help="Photo and video albums.", no_args_is_help=True)
media_app = typer.Typer(help="Photos and videos in albums.", no_args_is_help=True)

Owner = Annotated[str, typer.Option(help="Owner of the album and its items.")]


def _size(size: int | None) -> str:
    if size is None:
        return ""
    value = float(size)
    for unit in ("B", "KiB", "MiB"):
        if value < 1024 or unit == "MiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{value:.1f} GiB"  # pragma: no cover


def _state(view: dict[str, Any]) -> str:
    if view["halted"]:
        return f"[red]halted[/red] at {view['stage']} — {view['halt_reason']}"
    if view["done"]:
        return "[green]done[/green]"
    return str(view["stage"])


def print_item(view: dict[str, Any]) -> None:
    """Print an item's state and its roles with sizes for a person."""
    console.print(
        f"[bold]item {view['id']}[/bold]  {view['kind']}  {view['original_name'] or ''}",
        highlight=False,
    )
    console.print(f"  state      {_state(view)}")
    if view["halted"]:
        console.print(f"  reason     {view['halt_error']}", markup=False, highlight=False)
    if view["width"]:
        line = f"  size       {view['width']}×{view['height']}"
        if view["duration"] is not None:
            line += f", {view['duration']:.2f} s"
        console.print(line)
    if view["captured_at"]:
        console.print(f"  captured   {view['captured_at']}")
    table = Table("role", "type", "pixels", "bytes", box=None, padding=(0, 2, 0, 4))
    for role, obj in view["roles"].items():
        pixels = f"{obj['width']}×{obj['height']}" if obj["width"] else ""
        table.add_row(role, obj["mime_type"], pixels, _size(obj["size"]))
    console.print(table)


@albums_app.command("create")
def albums_create(
    name: Annotated[str, typer.Argument(help="The album's name.")], owner: Owner = "me"
) -> None:
    """Create an album."""
    runtime = make_runtime()
    try:
        album_id = album_views.create_album(runtime.engine, runtime.clock, owner=owner, name=name)
    except (Conflict, RejectedInput) as exc:
        raise fail(str(exc)) from None
    console.print(f"album {album_id} [bold]{name}[/bold] created")


@albums_app.command("list")
def albums_list(
    owner: Annotated[str | None, typer.Option(help="Only this owner's albums.")] = None,
) -> None:
    """List albums with their item counts."""
    runtime = make_runtime()
    with runtime.engine.connect() as conn:
        rows = album_views.list_albums(conn, owner)
    table = Table("id", "owner", "name", "items", "created")
    for row in rows:
        table.add_row(
            str(row["id"]), row["owner"], row["name"], str(row["items"]), row["created_at"] or ""
        )
    console.print(table)


@albums_app.command("watch")
def albums_watch(
    album: Annotated[str, typer.Argument(help="Album id or name.")],
    owner: Owner = "me",
    since: Annotated[
        int | None,
        typer.Option(help="Continue after this event id (0 = whole history); default: from now."),
    ] = None,
) -> None:
    """Print the album's events live until Ctrl-C (M5)."""
    runtime = make_runtime()
    with runtime.engine.connect() as conn:
        try:
            album_id = int(album_views.find_album(conn, album, owner=owner)["id"])
        except NotFound as exc:
            raise fail(str(exc)) from None
    stop = stop_on_signals()
    broadcast = AlbumBroadcast(runtime.engine, runtime.notifier)
    err_console.print(f"watching album {album_id}; Ctrl-C to stop")
    with broadcast.subscribe(album_id, since, stop=stop) as subscription:
        for event in subscription:
            console.print(
                json.dumps(
                    {
                        "id": event.id,
                        "kind": event.kind,
                        "item_id": event.item_id,
                        "payload": event.payload,
                    }
                ),
                markup=False,
                highlight=False,
                soft_wrap=True,
            )


@media_app.command("add")
def media_add(
    album: Annotated[str, typer.Argument(help="Album id or name.")],
    files: Annotated[list[Path], typer.Argument(help="Photos and videos to add.")],
    owner: Owner = "me",
) -> None:
    """Add photos and videos: accept, process until each is done or halted, print roles."""
    setup_logging(logging.WARNING)
    runtime = make_runtime()
    with runtime.engine.connect() as conn:
        try:
            album_id = int(album_views.find_album(conn, album, owner=owner)["id"])
        except NotFound as exc:
            raise fail(str(exc)) from None
    ids, refused = accept_files(
        files,
        lambda path: accept_media(
            runtime.engine,
            runtime.store,
            runtime.clock,
            path,
            album_id=album_id,
            owner=owner,
            max_pixels=runtime.settings.media.max_pixels,
        ),
    )
    if not ids:
        raise typer.Exit(1)
    media = runtime.settings.media
    if media.short_workers == 0:
        console.print(
            f"accepted items {', '.join(map(str, ids))}; [media] short_workers = 0, so they "
            "wait for a `conveyor worker`"
        )
        raise typer.Exit(0)
    stop = stop_on_signals()
    pool = runtime.pool({SHORT_LANE: media.short_workers, LONG_LANE: media.long_workers})
    pool.start()
    runtime.notifier.wake_local()
    try:
        _follow(runtime.engine, ids, stop, waits_for_playback=media.long_workers > 0)
    finally:
        pool.stop()
    failed = refused > 0
    with runtime.engine.connect() as conn:
        for item_id in ids:
            view = album_views.item_view(conn, item_id)
            print_item(view)
            failed = failed or view["halted"]
    if stop.is_set():
        err_console.print("stopped before every item finished; `conveyor worker` continues them")
        failed = True
    raise typer.Exit(1 if failed else 0)


def _follow(engine: Any, ids: list[int], stop: Any, *, waits_for_playback: bool) -> None:
    """Show each item's progress until it is done or halted (videos: playback too)."""
    with progress_display("state") as progress:
        tasks: dict[int, Any] = {}
        pending = set(ids)
        while pending and not stop.is_set():
            with engine.connect() as conn:
                for item_id in list(pending):
                    item = queries.item_by_id(conn, item_id)
                    assert item is not None
                    if item_id not in tasks:
                        total = 2 if item["kind"] == "video" else 1
                        name = item["original_name"] or f"item {item_id}"
                        tasks[item_id] = progress.add_task(name, total=total, state="uploaded")
                    halted = item["halted_at"] is not None
                    stage = item["stage"]
                    done_steps = {"uploaded": 0, "transcoding": 1, "done": 2}[stage]
                    if halted:
                        label = f"halted: {item['halt_reason']}"
                    elif stage == "transcoding":
                        label = "variants ready; transcoding playback"
                    else:
                        label = stage
                    total = 2 if item["kind"] == "video" else 1
                    progress.update(tasks[item_id], completed=min(done_steps, total), state=label)
                    if (
                        halted
                        or stage == "done"
                        or (stage == "transcoding" and not waits_for_playback)
                    ):
                        pending.discard(item_id)
            time.sleep(0.2)


@media_app.command("show")
def media_show(
    item_id: Annotated[int, typer.Argument(help="The item's id.")],
    as_json: Annotated[bool, typer.Option("--json", help="Print the item as JSON.")] = False,
) -> None:
    """Show an item: state, halt reason, and its roles with sizes (M1-M3)."""
    runtime = make_runtime()
    with runtime.engine.connect() as conn:
        try:
            view = album_views.item_view(conn, item_id)
        except NotFound as exc:
            raise fail(str(exc)) from None
    if as_json:
        console.print_json(json.dumps(view))
        return
    print_item(view)


@media_app.command("list")
def media_list(
    album: Annotated[str, typer.Argument(help="Album id or name.")], owner: Owner = "me"
) -> None:
    """List an album's items, newest upload first."""
    runtime = make_runtime()
    with runtime.engine.connect() as conn:
        try:
            album_id = int(album_views.find_album(conn, album, owner=owner)["id"])
        except NotFound as exc:
            raise fail(str(exc)) from None
        views = album_views.album_items(conn, album_id)
    table = Table("id", "kind", "name", "state", "roles", "uploaded")
    for view in views:
        table.add_row(
            str(view["id"]),
            view["kind"],
            view["original_name"] or "",
            _state(view),
            ", ".join(view["roles"]),
            view["uploaded_at"] or "",
        )
    console.print(table)


@media_app.command("resume")
def media_resume(item_id: Annotated[int, typer.Argument(help="The halted item's id.")]) -> None:
    """Resume a halted item from the stage it reached (P9)."""
    runtime = make_runtime()
    try:
        stage = resume_record(runtime.engine, runtime.media, item_id, clock=runtime.clock)
    except (NotFound, Conflict) as exc:
        raise fail(str(exc)) from None
    runtime.notifier.publish()
    console.print(f"item {item_id} resumed at stage [bold]{stage}[/bold]")
