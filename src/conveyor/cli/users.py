"""``conveyor users …`` and ``conveyor tokens …``: owners and their API tokens."""

from __future__ import annotations

from typing import Annotated

import typer

from conveyor.cli.exits import ExitCode
from conveyor.cli.output import console, fail, no_such_id, note, table
from conveyor.cli.settings import make_runtime

__all__ = ["tokens_app", "users_app"]

users_app = typer.Typer(help="Owners of records and albums.", no_args_is_help=True)
tokens_app = typer.Typer(help="Bearer tokens of the HTTP API.", no_args_is_help=True)


def _ask_password(name: str) -> str:
    # Asked twice and never echoed; read from standard input when it is not a terminal.
    password: str = typer.prompt(f"password for {name}", hide_input=True, confirmation_prompt=True)
    return password


@users_app.command("add")
def users_add(
    name: Annotated[str, typer.Argument(metavar="NAME", help="The user name (no spaces).")],
    password: Annotated[
        bool,
        typer.Option(
            "--password",
            help="Ask for a password (typed twice, not shown) so the user can sign in to "
            "the web app.",
        ),
    ] = False,
    admin: Annotated[
        bool, typer.Option("--admin", help="May open the operator view of the web app.")
    ] = False,
) -> None:
    """Add a user; records and albums uploaded with their tokens belong to them."""
    from conveyor.accounts import add_user, check_new_password, set_admin, set_password
    from conveyor.errors import Conflict, RejectedInput

    runtime = make_runtime()
    secret = _ask_password(name.strip()) if password else None
    try:
        if secret is not None:
            check_new_password(secret)
        user_id = add_user(runtime.engine, runtime.clock, name)
        if secret is not None:
            set_password(runtime.engine, name, secret)
        if admin:
            set_admin(runtime.engine, name, True)
    except Conflict as exc:
        raise fail(str(exc), ExitCode.CONFLICT) from None
    except RejectedInput as exc:
        raise fail(str(exc), ExitCode.USAGE) from None
    extra = " with a password" if secret is not None else ""
    extra += " (admin)" if admin else ""
    console.print(f"user {user_id} {name.strip()!r} added{extra}")


@users_app.command("passwd")
def users_passwd(
    name: Annotated[str, typer.Argument(metavar="NAME", help="Whose password.")],
) -> None:
    """Set a user's web sign-in password (asked twice, not shown); signs their sessions out."""
    from conveyor.accounts import set_password
    from conveyor.errors import NotFound, RejectedInput

    runtime = make_runtime()
    secret = _ask_password(name.strip())
    try:
        set_password(runtime.engine, name, secret)
    except NotFound as exc:
        raise fail(str(exc), ExitCode.NOT_FOUND) from None
    except RejectedInput as exc:
        raise fail(str(exc), ExitCode.USAGE) from None
    console.print(f"password of {name.strip()!r} set")


@users_app.command("admin")
def users_admin(
    name: Annotated[str, typer.Argument(metavar="NAME", help="The user.")],
    revoke: Annotated[bool, typer.Option("--revoke", help="Take the admin flag away.")] = False,
) -> None:
    """Make a user an administrator (the web app's operator view), or no longer one."""
    from conveyor.accounts import set_admin
    from conveyor.errors import NotFound

    runtime = make_runtime()
    try:
        set_admin(runtime.engine, name, not revoke)
    except NotFound as exc:
        raise fail(str(exc), ExitCode.NOT_FOUND) from None
    state = "no longer an admin" if revoke else "an admin"
    console.print(f"{name.strip()!r} is {state}")


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
    out = table("id", "name", "created", "password", "admin")
    for user in users:
        out.add_row(
            str(user["id"]),
            user["name"],
            iso_utc(user["created_at"]) or "",
            "yes" if user["has_password"] else "no",
            "yes" if user["is_admin"] else "no",
        )
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
