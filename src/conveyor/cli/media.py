"""``conveyor albums …`` and ``conveyor media …``: photo and video albums from the shell."""

from __future__ import annotations

import logging
import shlex
import time
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, NoReturn

import typer
from rich.text import Text

from conveyor.cli.exits import ExitCode
from conveyor.cli.groups import CommandGroup
from conveyor.cli.ids import IdParser
from conveyor.cli.ingest import OWNER_HELP, KeepDuplicates, check_owner, media_hint
from conveyor.cli.intake_output import IntakeOutput, row_state
from conveyor.cli.output import (
    JsonOption,
    console,
    fail,
    note,
    print_json,
    print_json_line,
    progress_display,
    setup_logging,
    table,
)
from conveyor.cli.settings import make_runtime
from conveyor.cli.signals import stop_on_signals
from conveyor.cli.texts import TextParser
from conveyor.kinds import SHELL_USER
from conveyor.limits import ALBUM_NAME
from conveyor.sizes import human_size

if TYPE_CHECKING:
    from sqlalchemy import Connection, Engine

    from conveyor.cli.intake import Intake
    from conveyor.runtime import Runtime

__all__ = ["AlbumRef", "Owner", "album_id_of", "albums_app", "media_app", "print_item"]

albums_app = CommandGroup(help="Photo and video albums.")
media_app = CommandGroup(help="Photos and videos (items) in albums.")

Owner = Annotated[str, typer.Option(metavar="NAME", help=OWNER_HELP)]
AlbumRef = Annotated[str, typer.Argument(metavar="ALBUM", help="The album's id or name.")]
ItemId = Annotated[
    int,
    typer.Argument(
        metavar="ITEM_ID",
        help="The item's id (from `conveyor media list ALBUM`).",
        parser=IdParser("ITEM"),
    ),
]


def _state(view: dict[str, Any]) -> Text:
    if view["halted"]:
        return Text.assemble(("halted", "red"), f" at stage {view['stage']}: {view['halt_reason']}")
    if view["done"]:
        return Text("done", style="green")
    return Text(str(view["stage"]))


def _state_cell(view: dict[str, Any]) -> Text:
    """The state as one word for a table column: ``done``, a stage, ``halted:REASON``."""
    if view["halted"]:
        return Text(f"halted:{view['halt_reason']}", style="red")
    return _state(view)


def print_item(view: dict[str, Any]) -> None:
    """Print an item's state, its way forward when halted, and its roles with sizes."""
    from conveyor.halts import way_forward
    from conveyor.media.domain import MEDIA

    console.print(
        Text.assemble(
            (f"item {view['id']}", "bold"), f"  {view['kind']}  {view['original_name'] or ''}"
        )
    )
    console.print(Text.assemble("  state      ", _state(view)))
    if view["halted"]:
        console.print(f"  reason     {view['halt_error']}")
        console.print(f"  halted at  {view['halted_at']}")
        console.print(f"  next       {way_forward(view['halt_reason'], MEDIA.halt_reasons)}")
    console.print(f"  attempts   {view['attempts']}")
    if view["width"]:
        line = f"  pixels     {view['width']}×{view['height']}"
        if view["duration"] is not None:
            line += f", {view['duration']:.2f} s"
        console.print(line)
    if view["captured_at"]:
        console.print(f"  captured   {view['captured_at']}")
    roles = table("    role", "type", "pixels", "size")
    for role, obj in view["roles"].items():
        pixels = f"{obj['width']}×{obj['height']}" if obj["width"] else None
        size = human_size(obj["size"]) if obj["size"] is not None else None
        roles.add_row(f"    {role}", obj["mime_type"], pixels, size)
    console.print(roles)


def album_id_of(runtime: Runtime, conn: Connection, album: str, owner: str) -> int:
    """The album's id, or a not-found exit that hints at ``--owner`` when another owner has it."""
    from conveyor.errors import NotFound
    from conveyor.media import albums as album_views

    try:
        return int(album_views.find_album(conn, album, owner=owner)["id"])
    except NotFound:
        pass
    others = sorted(
        {
            str(a["owner"])
            for a in album_views.list_albums(conn)
            if a["name"] == album.strip() or str(a["id"]) == album.strip()
        }
    )
    if others:
        raise fail(
            f"album {album!r} does not exist for owner {owner!r}; it belongs to "
            f"{', '.join(others)}: pass --owner {others[0]}",
            ExitCode.NOT_FOUND,
        )
    create = (
        "" if album.strip().isdigit() else f"create it with `conveyor albums create {album!r}`; "
    )
    raise fail(
        f"album {album!r} does not exist for owner {owner!r}; {create}"
        "`conveyor albums list` shows every owner's albums",
        ExitCode.NOT_FOUND,
    )


@albums_app.command("create")
def albums_create(
    name: Annotated[
        str,
        typer.Argument(
            metavar="NAME",
            help=f"The album's name ({ALBUM_NAME.rule}).",
            parser=TextParser(ALBUM_NAME),
        ),
    ],
    owner: Owner = "me",
    as_json: JsonOption = False,
) -> None:
    """Create an album."""
    from conveyor.errors import Conflict, RejectedInput
    from conveyor.media import albums as album_views

    check_owner(owner)
    runtime = make_runtime()
    try:
        album_id = album_views.create_album(runtime.engine, runtime.clock, owner=owner, name=name)
    except Conflict as exc:
        raise fail(f"{exc} for owner {owner!r}", ExitCode.CONFLICT) from None
    except RejectedInput as exc:
        raise fail(str(exc), ExitCode.USAGE) from None
    if as_json:
        print_json({"id": album_id, "name": name.strip(), "owner": owner})
        return
    console.print(f"album {album_id} {name!r} created for owner {owner!r}")


@albums_app.command("list")
def albums_list(
    owner: Annotated[
        str | None,
        typer.Option(metavar="NAME", help="Only this owner's albums; default: every owner's."),
    ] = None,
    as_json: JsonOption = False,
) -> None:
    """List albums with their item counts."""
    from conveyor.media import albums as album_views

    runtime = make_runtime()
    with runtime.engine.connect() as conn:
        rows = album_views.list_albums(conn, owner)
    if as_json:
        print_json(
            [
                {
                    "id": row["id"],
                    "owner": row["owner"],
                    "name": row["name"],
                    "items": row["items"],
                    "created_at": row["created_at"],
                }
                for row in rows
            ]
        )
        return
    if not rows and owner is not None:  # others may have albums: say whose there are none of
        note(
            f"no albums of owner {owner!r}; create one with `conveyor albums create NAME "
            f"--owner {shlex.quote(owner)}`"
        )
    elif not rows:
        note("no albums yet; create one with `conveyor albums create NAME`")
        return
    out = table("id", "owner", "name", "items", "created")
    for row in rows:
        out.add_row(str(row["id"]), row["owner"], row["name"], str(row["items"]), row["created_at"])
    console.print(out)


@albums_app.command("watch")
def albums_watch(
    album: AlbumRef,
    owner: Owner = "me",
    since: Annotated[
        int | None,
        typer.Option(
            metavar="ID",
            help="Continue after this event id (0 = whole history); default: from now.",
            parser=IdParser("ALBUM_EVENT"),
        ),
    ] = None,
) -> None:
    """Print the album's events live, one JSON object per line, until Ctrl-C."""
    import json

    from conveyor.media.broadcast import AlbumBroadcast

    runtime = make_runtime()
    with runtime.engine.connect() as conn:
        album_id = album_id_of(runtime, conn, album, owner)
    stop = stop_on_signals()
    broadcast = AlbumBroadcast(runtime.engine, runtime.notifier)
    note(f"watching album {album_id}; Ctrl-C to stop")
    with broadcast.subscribe(album_id, since, stop=stop) as subscription:
        for event in subscription:
            document = {
                "id": event.id,
                "kind": event.kind,
                "item_id": event.item_id,
                "payload": event.payload,
            }
            print(json.dumps(document, ensure_ascii=False), flush=True)


@media_app.command("add")
def media_add(
    album: AlbumRef,
    files: Annotated[list[Path], typer.Argument(metavar="FILES", help="Photos and videos to add.")],
    owner: Owner = "me",
    keep_duplicates: KeepDuplicates = False,
    as_json: JsonOption = False,
) -> None:
    """Add photos and videos: accept, process until each is done or halted, print roles.

    A file already there (the owner's item with the same bytes, unless --keep-duplicates) is
    waited for and printed as one accepted, so a rerun of an interrupted command finishes it.
    """
    from conveyor.errors import NotFound
    from conveyor.media import albums as album_views
    from conveyor.media.domain import LONG_LANE, SHORT_LANE
    from conveyor.media.intake import accept_media

    setup_logging(logging.WARNING)
    check_owner(owner)
    runtime = make_runtime()
    with runtime.engine.connect() as conn:
        album_id = album_id_of(runtime, conn, album, owner)
    out = IntakeOutput("item", len(files), as_json)
    stop = stop_on_signals(closed_stdout=True)
    intake = out.take(
        runtime,
        lambda chunks, name: accept_media(
            runtime.engine,
            runtime.store,
            runtime.clock,
            chunks,
            album_id=album_id,
            owner=owner,
            original_name=name,
            max_pixels=runtime.settings.media.max_pixels,
            keep_duplicate=keep_duplicates,
        ),
        files,
        hint=media_hint,
        stop=stop,
        held_where=lambda item_id: _in_another_album(runtime, item_id, album_id),
    )
    # Each item once (a Live Photo's movie after its still answers with the still's id), those
    # already there too: perhaps accepted by an interrupted run, not done yet.
    ids = intake.followed
    media = runtime.settings.media

    def cards() -> list[dict[str, Any]]:
        """The items' views as they stand, for ``result`` events."""
        found = []
        with runtime.engine.connect() as conn:
            for item_id in ids:
                try:
                    found.append(album_views.item_view(conn, item_id))
                except NotFound:  # deleted meanwhile
                    continue
        return found

    if intake.stopped or not ids or media.short_workers == 0:
        idle = "[media] short_workers" if media.short_workers == 0 else None
        out.end_early(intake, idle, cards=cards)
    if _finished(runtime.engine, ids, out, waits_for_playback=media.long_workers > 0):
        # All already there and done or halted: said at once, no worker started.
        _print_items(runtime.engine, ids, out, intake, stopped=False)
    pool = runtime.pool({SHORT_LANE: media.short_workers, LONG_LANE: media.long_workers})
    # Registered as `conveyor worker` is: seen by `conveyor workers`, obeys pauses and drains.
    registry = runtime.registry(pool)
    registry.start()
    if SHORT_LANE in registry.paused:
        registry.stop()
        out.end_early(intake, None, paused_lane=SHORT_LANE, cards=cards)
    from conveyor.cli.drain import StopOrDrain

    stop_waiting = StopOrDrain(stop, registry)
    # A paused long lane leaves videos for playback as long_workers = 0 does.
    playback = media.long_workers > 0 and LONG_LANE not in registry.paused
    pool.start()
    runtime.notifier.wake_local()
    try:
        _follow(runtime.engine, ids, stop_waiting, out, waits_for_playback=playback)
    finally:
        pool.stop()
        registry.stop()
    _print_items(runtime.engine, ids, out, intake, stopped=stop_waiting.is_set())


def _print_items(
    engine: Engine, ids: list[int], out: IntakeOutput, intake: Intake, *, stopped: bool
) -> NoReturn:
    """Each item with its roles (``result`` events with ``--json``), the summary, and the exit
    code."""
    from conveyor.errors import NotFound
    from conveyor.media import albums as album_views

    done = halted = deleted = 0
    with engine.connect() as conn:
        for item_id in ids:
            try:
                view = album_views.item_view(conn, item_id)
            except NotFound:  # deleted while we waited (`media delete`, the API)
                out.deleted(item_id)
                deleted += 1
                continue
            if out.as_json:
                out.result(view)
            else:
                print_item(view)
            done += bool(view["done"])
            halted += bool(view["halted"])
    out.finish(intake, done, halted, deleted, stopped=stopped, unfinished_ok=True)


def _finished_item(item: Any, *, waits_for_playback: bool) -> bool:
    """Whether ``item`` (a row) needs no more work from this command: halted, done, or its
    images ready with playback left to another process."""
    stage = item["stage"]
    return (
        item["halted_at"] is not None
        or stage == "done"
        or (stage == "transcoding" and not waits_for_playback)
    )


def _in_another_album(runtime: Runtime, item_id: int, album_id: int) -> str:
    """`` in album "K"`` when the item ``item_id`` (already holding a file's bytes) is in an
    album other than ``album_id``: duplicates are found across the owner's albums, and "already
    there" alone reads as if the file were in the album given. Empty when it is there."""
    from conveyor.media import queries

    with runtime.engine.connect() as conn:
        item = queries.item_by_id(conn, item_id, None)
        if item is None or item["album_id"] == album_id:
            return ""
        album = queries.album_by_id(conn, item["album_id"])
    return f' in album "{album["name"]}"' if album is not None else ""


def _finished(
    engine: Engine, ids: list[int], out: IntakeOutput, *, waits_for_playback: bool
) -> bool:
    """Whether no item of ``ids`` needs this command's workers (each done, halted, left for
    playback or gone); then each one's state is said, as a run that waited says it."""
    from conveyor.media import queries

    with engine.connect() as conn:
        items = {item_id: queries.item_by_id(conn, item_id) for item_id in ids}
    return out.said_if_finished(
        items, lambda item: _finished_item(item, waits_for_playback=waits_for_playback), _state_line
    )


def _state_line(item: Any) -> str:
    """An item's state as people read it (``--json`` says the stage itself): ``halted:
    REASON``, ``variants ready; transcoding playback``, else its stage; the same line whether a
    run waited for it or found it already there."""
    if item["halted_at"] is None and item["stage"] == "transcoding":
        return "variants ready; transcoding playback"
    return row_state(item)


def _follow(
    engine: Any, ids: list[int], stop: Any, out: IntakeOutput, *, waits_for_playback: bool
) -> None:
    """Show each item's progress until it is done or halted (videos: playback too)."""
    from conveyor.kinds import MediaKind
    from conveyor.media import queries
    from conveyor.media.domain import MEDIA

    with progress_display("state") as progress:
        tasks: dict[int, Any] = {}
        pending = set(ids)
        while pending and not stop.is_set():
            with engine.connect() as conn:
                for item_id in list(pending):
                    item = queries.item_by_id(conn, item_id)
                    if item is None:  # deleted meanwhile (`media delete`, the API)
                        pending.discard(item_id)
                        out.deleted(item_id, progress.console)
                        continue
                    # The steps it goes through: variants, then playback for a kind that plays.
                    total = 2 if MediaKind(item["kind"]).plays else 1
                    if item_id not in tasks:
                        name = f"item {item_id} {item['original_name'] or ''}"
                        tasks[item_id] = progress.add_task(name, total=total, state="uploaded")
                    stage = item["stage"]
                    done_steps = MEDIA.stage_names.index(stage)
                    label = _state_line(item)
                    progress.update(tasks[item_id], completed=min(done_steps, total), state=label)
                    # --json says the stage itself (docs/cli.md); people read the label.
                    out.state(item_id, row_state(item), label)
                    if _finished_item(item, waits_for_playback=waits_for_playback):
                        pending.discard(item_id)
            time.sleep(0.2)


@media_app.command("show")
def media_show(
    item_id: ItemId,
    as_json: JsonOption = False,
) -> None:
    """Show an item: state, halt reason and the way forward, its roles with sizes."""
    from conveyor.errors import NotFound
    from conveyor.media import albums as album_views

    runtime = make_runtime()
    with runtime.engine.connect() as conn:
        try:
            view = album_views.item_view(conn, item_id)
        except NotFound as exc:
            raise fail(str(exc), ExitCode.NOT_FOUND) from None
    if as_json:
        print_json(view)
        return
    print_item(view)


@media_app.command("list")
def media_list(album: AlbumRef, owner: Owner = "me", as_json: JsonOption = False) -> None:
    """List an album's items, newest capture first (an item without a capture time at its
    upload time)."""
    from conveyor.media import albums as album_views

    runtime = make_runtime()
    with runtime.engine.connect() as conn:
        album_id = album_id_of(runtime, conn, album, owner)
        views = album_views.album_items(conn, album_id)
    if as_json:
        print_json(views)
        return
    if not views:
        # By id: a name with a space or a newline would not paste back as one argument.
        whose = f" --owner {shlex.quote(owner)}" if owner != SHELL_USER else ""
        note(
            f"album {album_id} has no items yet; add some with "
            f"`conveyor media add {album_id} FILE…{whose}`"
        )
        return
    out = table("id", "kind", "name", "state", "roles", "uploaded")
    for view in views:
        out.add_row(
            str(view["id"]),
            view["kind"],
            view["original_name"],
            _state_cell(view),
            ",".join(view["roles"]),
            view["uploaded_at"],
        )
    console.print(out)


@media_app.command("resume")
def media_resume(
    item_ids: Annotated[
        list[int] | None,
        typer.Argument(
            metavar="ITEM_IDS",
            help="Ids of halted items.",
            show_default=False,
            parser=IdParser("ITEM"),
        ),
    ] = None,
    reason: Annotated[
        str | None,
        typer.Option(
            metavar="REASON", help="Every item halted with this reason (e.g. undecodable)."
        ),
    ] = None,
    stage: Annotated[
        str | None, typer.Option(metavar="STAGE", help="Every item halted at this stage.")
    ] = None,
    every: Annotated[bool, typer.Option("--all", help="Every halted item.")] = False,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Count and list them; change nothing.")
    ] = False,
    as_json: JsonOption = False,
) -> None:
    """Resume halted items from the stage each reached: by id, or every one halted with a
    reason (--reason), at a stage (--stage), or all (--all); --dry-run counts them first."""
    ids = item_ids or []
    if len(ids) == 1 and not (reason or stage or every or dry_run or as_json):
        _resume_item(ids[0])
        return
    from conveyor.cli.bulk import resume_command

    runtime = make_runtime()
    resume_command(
        runtime,
        runtime.media,
        "item",
        ids,
        reason=reason,
        stage=stage,
        every=every,
        dry_run=dry_run,
        as_json=as_json,
    )


@media_app.command("delete")
def media_delete(
    item_ids: Annotated[
        list[int],
        typer.Argument(
            metavar="ITEM_IDS", help="Ids of the photos or videos.", parser=IdParser("ITEM")
        ),
    ],
    as_json: JsonOption = False,
) -> None:
    """Delete photos or videos with every stored object; the album's watchers are told.
    A step running on one writes nothing afterwards; idempotent."""
    from conveyor.media.deletion import delete_item

    runtime = make_runtime()
    missing = 0
    for item_id in item_ids:
        deleted = delete_item(runtime.engine, runtime.store, runtime.clock, item_id)
        if as_json:
            print_json_line({"id": item_id, "deleted": deleted})
        elif deleted:
            console.print(f"item {item_id} deleted")
        if not deleted:
            missing += 1
            note(f"item {item_id} does not exist; nothing to delete")
    if missing:
        raise typer.Exit(ExitCode.NOT_FOUND)


@albums_app.command("delete")
def albums_delete(album: AlbumRef, owner: Owner = "me", as_json: JsonOption = False) -> None:
    """Delete an album with every item in it and their objects; open event streams of it end.
    An album that does not exist is reported with exit code 3."""
    from conveyor.media.deletion import delete_album

    runtime = make_runtime()
    with runtime.engine.connect() as conn:
        album_id = album_id_of(runtime, conn, album, owner)
    count = delete_album(runtime.engine, runtime.store, runtime.clock, album_id, owner=owner)
    if count is None:
        raise fail(f"album {album_id} does not exist; nothing to delete", ExitCode.NOT_FOUND)
    if as_json:
        print_json({"id": album_id, "deleted": True, "items": count})
        return
    console.print(f"album {album_id} deleted with {count} items")


def _resume_item(item_id: int) -> None:
    from conveyor.cli.bulk import resume_one
    from conveyor.media import queries

    runtime = make_runtime()
    resume_one(runtime, runtime.media, item_id, queries.item_by_id)
