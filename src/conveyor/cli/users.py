"""``conveyor users …`` and ``conveyor tokens …``: owners and their API tokens."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.table import Table

from conveyor.accounts import add_user, create_token, list_tokens, list_users, revoke_token
from conveyor.cli.common import console, err_console, fail, make_runtime
from conveyor.clock import iso_utc
from conveyor.errors import Conflict, NotFound, RejectedInput

__all__ = ["tokens_app", "users_app"]

users_app = typer.Typer(help="Owners of records and albums.", no_args_is_help=True)
tokens_app = typer.Typer(help="Bearer tokens of the HTTP API.", no_args_is_help=True)


@users_app.command("add")
def users_add(name: Annotated[str, typer.Argument(help="The user name (no spaces).")]) -> None:
    """Add a user; records and albums uploaded with their tokens belong to them."""
    runtime = make_runtime()
    try:
        user_id = add_user(runtime.engine, runtime.clock, name)
    except (Conflict, RejectedInput) as exc:
        raise fail(str(exc)) from None
    console.print(f"user {user_id} [bold]{name.strip()}[/bold] added")


@users_app.command("list")
def users_list() -> None:
    """List users."""
    runtime = make_runtime()
    table = Table("id", "name", "created")
    for user in list_users(runtime.engine):
        table.add_row(str(user["id"]), user["name"], iso_utc(user["created_at"]) or "")
    console.print(table)


@tokens_app.command("create")
def tokens_create(
    user: Annotated[str, typer.Argument(help="The user the token acts for.")],
    label: Annotated[str | None, typer.Option(help="A note: which device or script.")] = None,
) -> None:
    """Create a token and print it once (only its hash is stored)."""
    runtime = make_runtime()
    try:
        issued = create_token(runtime.engine, runtime.clock, user, label=label)
    except NotFound as exc:
        raise fail(str(exc)) from None
    err_console.print(
        f"token {issued.id} for [bold]{issued.user}[/bold] (shown once; keep it secret):"
    )
    # The bare token on stdout, so `TOKEN=$(conveyor tokens create alice)` works.
    print(issued.token)


@tokens_app.command("list")
def tokens_list(user: Annotated[str, typer.Argument(help="Whose tokens.")]) -> None:
    """List a user's tokens (never the secrets)."""
    runtime = make_runtime()
    try:
        tokens = list_tokens(runtime.engine, user)
    except NotFound as exc:
        raise fail(str(exc)) from None
    table = Table("id", "label", "created", "last used")
    for token in tokens:
        table.add_row(
            str(token["id"]),
            token["label"] or "",
            iso_utc(token["created_at"]) or "",
            iso_utc(token["last_used_at"]) or "",
        )
    console.print(table)


@tokens_app.command("revoke")
def tokens_revoke(token_id: Annotated[int, typer.Argument(help="The token's id.")]) -> None:
    """Revoke a token; requests bearing it get 401 from then on."""
    runtime = make_runtime()
    try:
        revoke_token(runtime.engine, token_id)
    except NotFound as exc:
        raise fail(str(exc)) from None
    console.print(f"token {token_id} revoked")
