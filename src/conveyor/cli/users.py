"""``conveyor users …`` and ``conveyor tokens …``: owners and their API tokens."""

from __future__ import annotations

import shlex
from typing import TYPE_CHECKING, Annotated

import typer

from conveyor.cli.exits import ExitCode
from conveyor.cli.groups import CommandGroup
from conveyor.cli.ids import IdParser
from conveyor.cli.output import JsonOption, console, fail, note, print_json, table
from conveyor.cli.settings import make_runtime
from conveyor.cli.texts import TextParser
from conveyor.kinds import SHELL_USER
from conveyor.limits import TOKEN_LABEL

if TYPE_CHECKING:
    from conveyor.runtime import Runtime

__all__ = ["tokens_app", "users_app"]

users_app = CommandGroup(help="Owners of records and albums.")
tokens_app = CommandGroup(help="Bearer tokens of the HTTP API.")


def _ask_password(name: str) -> str:
    """The new password of ``name``, asked twice and never echoed; prompts on stderr.

    From a terminal it is typed; otherwise two lines are read from standard input (no echo
    warning, no prompt on stdout).

    Raises:
        typer.Exit: :attr:`ExitCode.USAGE` when standard input ends first (a closed pipe, or
            Ctrl-D at the terminal's prompt) or the two differ. Nothing is changed. (Ctrl-C
            ends the command with exit code 130 from the signal handler.)
    """
    import sys

    if not sys.stdin.isatty():
        lines = [sys.stdin.readline() for _ in range(2)]
        if "" in lines:  # readline gives "" only at the end of input
            raise fail(
                f"standard input ended before the password for {name!r} was given twice "
                "(one line each); nothing was changed",
                ExitCode.USAGE,
            )
        first, second = (line.rstrip("\r\n") for line in lines)
        if first != second:
            raise fail("the two passwords differ; nothing was changed", ExitCode.USAGE)
        return first
    try:
        password: str = typer.prompt(
            f"password for {name!r}", hide_input=True, confirmation_prompt=True, err=True
        )
    except typer.Abort:
        # Click's prompt turns an end of input (Ctrl-D) into Abort; a Ctrl-C never gets here
        # (the SIGINT handler ends the command with 130), so this is the end of input.
        raise fail(
            f"standard input ended before the password for {name!r} was given twice; "
            "nothing was changed",
            ExitCode.USAGE,
        ) from None
    return password


def _known_user(runtime: Runtime, name: str) -> bool:
    from conveyor.accounts import list_users

    return any(user["name"] == name for user in list_users(runtime.engine))


def _shell_user(runtime: Runtime, name: str) -> None:
    """Make the user :data:`SHELL_USER` when ``name`` is it and it has no row yet, so that
    ``tokens create me``, ``users passwd me`` and ``users admin me`` work on what the shell
    added without ``--owner``; any other name must be made with ``users create``."""
    from conveyor.accounts import add_user
    from conveyor.errors import Conflict

    if name.strip() != SHELL_USER or _known_user(runtime, SHELL_USER):
        return
    try:
        add_user(runtime.engine, runtime.clock, SHELL_USER)
    except Conflict:  # made by another command meanwhile
        return
    note(
        f"user {SHELL_USER!r} created: the shell's own user, who owns what commands add "
        "without --owner"
    )


@users_app.command("create")
def users_create(
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
    as_json: JsonOption = False,
) -> None:
    """Add a user; records and albums uploaded with their tokens belong to them."""
    from conveyor.accounts import add_user, check_new_password, set_admin, set_password
    from conveyor.errors import Conflict, RejectedInput

    runtime = make_runtime()
    if password and _known_user(runtime, name.strip()):  # said before the prompt, not after
        raise fail(f"user {name.strip()!r} already exists", ExitCode.CONFLICT)
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
    if as_json:
        print_json(
            {"id": user_id, "name": name.strip(), "password": secret is not None, "admin": admin}
        )
        return
    extra = " with a password" if secret is not None else ""
    extra += " (admin)" if admin else ""
    console.print(f"user {user_id} {name.strip()!r} created{extra}")


users_app.alias("add", users_create)


@users_app.command("passwd")
def users_passwd(
    name: Annotated[str, typer.Argument(metavar="NAME", help="Whose password.")],
) -> None:
    """Set a user's web sign-in password (asked twice, not shown); signs their sessions out."""
    from conveyor.accounts import check_new_password, set_password
    from conveyor.errors import NotFound, RejectedInput

    runtime = make_runtime()
    shell = name.strip() == SHELL_USER  # made once its password is given and acceptable
    if not shell and not _known_user(runtime, name.strip()):  # said before the prompt
        raise fail(
            f"user {name.strip()!r} does not exist; `conveyor users list` shows every user",
            ExitCode.NOT_FOUND,
        )
    secret = _ask_password(name.strip())
    try:
        if shell:
            check_new_password(secret)  # a refused password leaves nothing made
            _shell_user(runtime, name)
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
    _shell_user(runtime, name)
    try:
        set_admin(runtime.engine, name, not revoke)
    except NotFound as exc:
        raise fail(str(exc), ExitCode.NOT_FOUND) from None
    state = "no longer an admin" if revoke else "an admin"
    console.print(f"{name.strip()!r} is {state}")


@users_app.command("list")
def users_list(as_json: JsonOption = False) -> None:
    """List users."""
    from conveyor.accounts import list_users
    from conveyor.clock import iso_utc

    runtime = make_runtime()
    users = list_users(runtime.engine)
    if all(user["name"] != SHELL_USER for user in users):
        # The shell's user owns what was added without --owner, but has no row until it is
        # needed; say so rather than leave a reader wondering where 'me' went.
        note(
            f"the shell's user {SHELL_USER!r} (the default --owner) is made when first "
            f"needed: `conveyor tokens create {SHELL_USER}` or `conveyor users passwd "
            f"{SHELL_USER}`"
        )
    if as_json:
        print_json(
            [
                {
                    "id": user["id"],
                    "name": user["name"],
                    "created_at": iso_utc(user["created_at"]),
                    "password": bool(user["has_password"]),
                    "admin": bool(user["is_admin"]),
                }
                for user in users
            ]
        )
        return
    if not users:
        note("no users yet; add one with `conveyor users create NAME`")
        return
    out = table("id", "name", "created", "password", "admin")
    for user in users:
        out.add_row(
            str(user["id"]),
            user["name"],
            iso_utc(user["created_at"]),
            "yes" if user["has_password"] else "no",
            "yes" if user["is_admin"] else "no",
        )
    console.print(out)


@tokens_app.command("create")
def tokens_create(
    user: Annotated[str, typer.Argument(metavar="USER", help="The user the token acts for.")],
    label: Annotated[
        str | None,
        typer.Option(
            metavar="L",
            help=f"A note: which device or script ({TOKEN_LABEL.rule}).",
            parser=TextParser(TOKEN_LABEL),
        ),
    ] = None,
    as_json: JsonOption = False,
) -> None:
    """Create a token and print it once (only its hash is stored)."""
    from conveyor.accounts import create_token
    from conveyor.errors import NotFound

    runtime = make_runtime()
    _shell_user(runtime, user)
    try:
        issued = create_token(runtime.engine, runtime.clock, user, label=label)
    except NotFound as exc:
        raise fail(
            f"{exc}; add the user with `conveyor users create {shlex.quote(user)}`",
            ExitCode.NOT_FOUND,
        ) from None
    if as_json:
        print_json({"id": issued.id, "user": issued.user, "label": label, "token": issued.token})
        return
    note(f"token {issued.id} for user {issued.user!r} (shown once; keep it secret):")
    # The bare token on stdout, so `TOKEN=$(conveyor tokens create alice)` works.
    print(issued.token)


@tokens_app.command("list")
def tokens_list(
    user: Annotated[str, typer.Argument(metavar="USER", help="Whose tokens.")],
    as_json: JsonOption = False,
) -> None:
    """List a user's tokens (never the secrets)."""
    from conveyor.accounts import list_tokens
    from conveyor.clock import iso_utc
    from conveyor.errors import NotFound

    runtime = make_runtime()
    try:
        tokens = list_tokens(runtime.engine, user)
    except NotFound as exc:
        if user.strip() != SHELL_USER:
            raise fail(
                f"{exc}; `conveyor users list` shows every user", ExitCode.NOT_FOUND
            ) from None
        tokens = []  # the shell's user, not made yet: a user with no tokens
    if as_json:
        print_json(
            [
                {
                    "id": token["id"],
                    "label": token["label"],
                    "created_at": iso_utc(token["created_at"]),
                    "last_used_at": iso_utc(token["last_used_at"]),
                }
                for token in tokens
            ]
        )
        return
    if not tokens:
        note(f"user {user!r} has no tokens; create one with `conveyor tokens create {user}`")
        return
    out = table("id", "label", "created", "last_used")
    for token in tokens:
        out.add_row(
            str(token["id"]),
            token["label"],
            iso_utc(token["created_at"]),
            iso_utc(token["last_used_at"]),
        )
    console.print(out)


@tokens_app.command("revoke")
def tokens_revoke(
    token_id: Annotated[
        int,
        typer.Argument(
            metavar="TOKEN_ID",
            help="The token's id (from `conveyor tokens list USER`).",
            parser=IdParser("TOKEN"),
        ),
    ],
) -> None:
    """Revoke a token; requests bearing it get 401 from then on."""
    from conveyor.accounts import revoke_token
    from conveyor.errors import NotFound

    runtime = make_runtime()
    try:
        revoke_token(runtime.engine, token_id)
    except NotFound as exc:
        raise fail(str(exc), ExitCode.NOT_FOUND) from None
    console.print(f"token {token_id} revoked")
