"""``conveyor albums share``, ``unshare``, ``shares`` and ``albums link …``: shared albums from
the shell (the owner's side; a shared album's users read it over HTTP or in the pages)."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Annotated, Any

import typer

from conveyor.cli.exits import ExitCode
from conveyor.cli.groups import CommandGroup
from conveyor.cli.ids import IdParser
from conveyor.cli.media import AlbumRef, Owner, albums_app
from conveyor.cli.output import JsonOption, console, fail, note, print_json, table
from conveyor.cli.settings import make_runtime
from conveyor.cli.texts import TextParser
from conveyor.limits import LINK_LABEL, USER_NAME

if TYPE_CHECKING:
    from conveyor.runtime import Runtime

__all__ = ["link_app", "parse_duration"]

link_app = CommandGroup(help="View-only links to an album (no account needed to open one).")
albums_app.add_typer(link_app, name="link")

User = Annotated[
    str, typer.Argument(metavar="USER", help="The user's name.", parser=TextParser(USER_NAME))
]
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86_400, "w": 7 * 86_400}
_DURATION = re.compile(r"(\d+(?:\.\d+)?)\s*([smhdw]?)")


def parse_duration(text: str) -> float:
    """Seconds in ``text``: a number with an optional unit, or several (``90``, ``45m``,
    ``12h``, ``7d``, ``2w``, ``1d12h``); s, m, h, d, w.

    Raises:
        typer.BadParameter: anything else (exit code 2).
    """
    spec = text.strip().lower()
    parts = _DURATION.findall(spec)
    if not spec or "".join(n + u for n, u in parts) != spec.replace(" ", ""):
        raise typer.BadParameter(
            f"{text!r} is not a duration: a number of seconds, or with a unit (45m, 12h, 7d, 2w)",
            param_hint="--expires",
        )
    return sum(float(n) * _UNITS[u or "s"] for n, u in parts)


def _owned(runtime: Runtime, album: str, owner: str) -> int:
    from conveyor.cli.media import album_id_of

    with runtime.engine.connect() as conn:
        return album_id_of(runtime, conn, album, owner)


@albums_app.command("share")
def albums_share(
    album: AlbumRef,
    user: User,
    role: Annotated[
        str,
        typer.Option(
            metavar="ROLE",
            help="viewer: sees the album, its items and live events; contributor: also adds "
            "photos and videos (and may delete what they added).",
        ),
    ] = "viewer",
    owner: Owner = "me",
    as_json: JsonOption = False,
) -> None:
    """Share an album with another user (again: change their role)."""
    from conveyor.errors import NotFound, RejectedInput
    from conveyor.kinds import ShareRole
    from conveyor.media import sharing

    try:
        chosen = ShareRole(role.strip().lower())
    except ValueError:
        raise typer.BadParameter(
            f"{role!r} is not one of {', '.join(r.value for r in ShareRole)}", param_hint="--role"
        ) from None
    runtime = make_runtime()
    album_id = _owned(runtime, album, owner)
    try:
        share = sharing.share_album(
            runtime.engine, runtime.clock, album_id, owner=owner, user=user, role=chosen
        )
    except NotFound as exc:
        raise fail(f"{exc}; `conveyor users list` shows every user", ExitCode.NOT_FOUND) from None
    except RejectedInput as exc:
        raise fail(str(exc), ExitCode.USAGE) from None
    if as_json:
        print_json({"album_id": album_id, **share})
        return
    note(f"album {album_id} shared with {share['user']} as {share['role']}")


@albums_app.command("unshare")
def albums_unshare(
    album: AlbumRef, user: User, owner: Owner = "me", as_json: JsonOption = False
) -> None:
    """Stop sharing an album with a user (what they added stays, the owner's)."""
    from conveyor.media import sharing

    runtime = make_runtime()
    album_id = _owned(runtime, album, owner)
    removed = sharing.unshare_album(runtime.engine, album_id, owner=owner, user=user)
    if as_json:
        print_json({"album_id": album_id, "user": user.strip(), "unshared": removed})
        return
    if removed:
        note(f"album {album_id} is no longer shared with {user.strip()}")
    else:
        note(f"album {album_id} was not shared with {user.strip()}; nothing changed")


@albums_app.command("shares")
def albums_shares(album: AlbumRef, owner: Owner = "me", as_json: JsonOption = False) -> None:
    """List who an album is shared with, and as what."""
    from conveyor.media import sharing

    runtime = make_runtime()
    album_id = _owned(runtime, album, owner)
    with runtime.engine.connect() as conn:
        shares = sharing.list_shares(conn, album_id, owner=owner)
    if as_json:
        print_json(shares)
        return
    if not shares:
        note(f"album {album_id} is shared with nobody; `conveyor albums share ALBUM USER`")
        return
    out = table("user", "role", "since")
    for share in shares:
        out.add_row(share["user"], share["role"], share["created_at"])
    console.print(out)


def _link(link: dict[str, Any]) -> dict[str, Any]:
    return {k: link[k] for k in ("id", "label", "created_at", "expires_at", "expired")}


@link_app.command("create")
def link_create(
    album: AlbumRef,
    expires: Annotated[
        str | None,
        typer.Option(
            metavar="DURATION",
            help="Stop working after this long (45m, 12h, 7d, 2w; at most ten years); "
            "default: until revoked.",
        ),
    ] = None,
    label: Annotated[
        str | None,
        typer.Option(
            metavar="L",
            help=f"A note for you: who it was given to ({LINK_LABEL.rule}).",
            parser=TextParser(LINK_LABEL),
        ),
    ] = None,
    owner: Owner = "me",
    as_json: JsonOption = False,
) -> None:
    """Make a view-only link to an album and print it once (only its hash is stored)."""
    from conveyor.clock import iso_utc
    from conveyor.errors import RejectedInput
    from conveyor.media import sharing

    expires_in = None if expires is None else parse_duration(expires)
    runtime = make_runtime()
    album_id = _owned(runtime, album, owner)
    try:
        issued = sharing.create_link(
            runtime.engine, runtime.clock, album_id, owner=owner, expires_in=expires_in, label=label
        )
    except RejectedInput as exc:
        raise fail(str(exc), ExitCode.USAGE) from None
    if as_json:
        # The API's answer (url, not a path of our own), with the album; `path` is the name
        # docs/cli.md gave url before, kept for scripts that read it.
        print_json({**issued.shown(), "album_id": album_id, "path": issued.url})
        return
    until = "until revoked" if issued.expires_at is None else f"until {iso_utc(issued.expires_at)}"
    note(
        f"link {issued.id} to album {album_id}, {until} (shown once; whoever holds it sees the "
        "album): open it on the server's address"
    )
    # The bare url on stdout, so `LINK=$(conveyor albums link create Trip)` works.
    print(issued.url)


@link_app.command("list")
def link_list(album: AlbumRef, owner: Owner = "me", as_json: JsonOption = False) -> None:
    """List an album's links not revoked, expired ones included (never a token)."""
    from conveyor.media import sharing

    runtime = make_runtime()
    album_id = _owned(runtime, album, owner)
    with runtime.engine.connect() as conn:
        links = sharing.list_links(conn, album_id, owner=owner, now=runtime.clock.now())
    if as_json:
        print_json([_link(link) for link in links])
        return
    if not links:
        note(f"album {album_id} has no links; `conveyor albums link create ALBUM`")
        return
    out = table("id", "label", "created", "expires", "state")
    for link in links:
        out.add_row(
            str(link["id"]),
            link["label"],
            link["created_at"],
            link["expires_at"] or "never",
            "expired" if link["expired"] else "active",
        )
    console.print(out)


@link_app.command("revoke")
def link_revoke(
    link_id: Annotated[
        int,
        typer.Argument(
            metavar="LINK_ID",
            help="The link's id (from `conveyor albums link list ALBUM`).",
            parser=IdParser("LINK"),
        ),
    ],
    owner: Owner = "me",
    as_json: JsonOption = False,
) -> None:
    """Revoke a link: it answers 404 from now on and its open pages stop updating."""
    from conveyor.errors import NotFound
    from conveyor.media import sharing

    runtime = make_runtime()
    try:
        with runtime.engine.connect() as conn:
            album_id = sharing.link_album(conn, link_id, owner=owner)
    except NotFound as exc:
        raise fail(
            f"{exc} for owner {owner!r}; `conveyor albums link list ALBUM` shows an album's links",
            ExitCode.NOT_FOUND,
        ) from None
    sharing.revoke_link(runtime.engine, album_id, link_id, owner=owner)
    if as_json:
        print_json({"id": link_id, "album_id": album_id, "revoked": True})
        return
    note(f"link {link_id} to album {album_id} revoked")
