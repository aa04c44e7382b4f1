"""``conveyor users …`` and ``conveyor tokens …``: owners and their API tokens."""

from __future__ import annotations

from typing import Annotated

import typer

from conveyor.cli.common import console, fail, make_runtime, no_such_id, note, table
from conveyor.cli.exits import ExitCode

__all__ = ["tokens_app", "users_app"]

users_app = typer.Typer(help="Owners of records and albums.", no_args_is_help=True)
tokens_app = typer.Typer(help="Bearer tokens of the HTTP API.", no_args_is_help=True)


@users_app.command("add")
def users_add(
    name: Annotated[str, typer.Argument(metavar="NAME", help="The user name (no spaces).")],
) -> None:
    """Add a user; records and albums uploaded with their tokens belong to them."""
    from conveyor.accounts import add_user
    from conveyor.errors import Conflict, RejectedInput

    runtime = make_runtime()
    try:
        user_id = add_user(runtime.engine, runtime.clock, name)
    except Conflict as exc:
        raise fail(str(exc), ExitCode.CONFLICT) from None
    except RejectedInput as exc:
        raise fail(str(exc), ExitCode.USAGE) from None
    console.print(f"user {user_id} {name.strip()!r} added")


@users_app.command("list")
def users_list() -> None:
    """List users."""
    from conveyor.accounts import list_users
    from conveyor.clock import iso_utc

    runtime = make_runtime()
    users = list_users(runtime.engine)
    if not users:
        note("no users yet; add one with `conveyor users add NAME`")
        return
    out = table("id", "name", "created")
    for user in users:
        out.add_row(str(user["id"]), user["name"], iso_utc(user["created_at"]) or "")
    console.print(out)


@tokens_app.command("create")
def tokens_create(
    user: Annotated[str, typer.Argument(metavar="USER", help="The user the token acts for.")],
    label: Annotated[
        str | None, typer.Option(metavar="L", help="A note: which device or script.")
    ] = None,
) -> None:
    """Create a token and print it once (only its hash is stored)."""
    from conveyor.accounts import create_token
    from conveyor.errors import NotFound

    runtime = make_runtime()
    try:
        issued = create_token(runtime.engine, runtime.clock, user, label=label)
    except NotFound as exc:
        raise fail(
            f"{exc}; add the user with `conveyor users add NAME`", ExitCode.NOT_FOUND
        ) from None
    note(f"token {issued.id} for user {issued.user!r} (shown once; keep it secret):")
    # The bare token on stdout, so `TOKEN=$(conveyor tokens create alice)` works.
    print(issued.token)


@tokens_app.command("list")
def tokens_list(user: Annotated[str, typer.Argument(metavar="USER", help="Whose tokens.")]) -> None:
    """List a user's tokens (never the secrets)."""
    from conveyor.accounts import list_tokens
    from conveyor.clock import iso_utc
    from conveyor.errors import NotFound

    runtime = make_runtime()
    try:
        tokens = list_tokens(runtime.engine, user)
    except NotFound as exc:
        raise fail(f"{exc}; `conveyor users list` shows every user", ExitCode.NOT_FOUND) from None
    if not tokens:
        note(f"user {user!r} has no tokens; create one with `conveyor tokens create {user}`")
        return
    out = table("id", "label", "created", "last used")
    for token in tokens:
        out.add_row(
            str(token["id"]),
            token["label"] or "",
            iso_utc(token["created_at"]) or "",
            iso_utc(token["last_used_at"]) or "",
        )
    console.print(out)


@tokens_app.command("revoke")
def tokens_revoke(
    token_id: Annotated[
        int,
        typer.Argument(
            metavar="TOKEN_ID", help="The token's id (from `conveyor tokens list USER`)."
        ),
    ],
) -> None:
    """Revoke a token; requests bearing it get 401 from then on."""
    from conveyor.accounts import revoke_token
    from conveyor.errors import NotFound

    missing = no_such_id("token", token_id)
    if missing is not None:
        raise missing
    runtime = make_runtime()
    try:
        revoke_token(runtime.engine, token_id)
    except NotFound as exc:
        raise fail(str(exc), ExitCode.NOT_FOUND) from None
    console.print(f"token {token_id} revoked")
