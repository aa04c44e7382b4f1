"""The root of the ``conveyor`` command and the table of its groups, so a run imports only the
group it names.

``conveyor records list`` imports the root, ``conveyor.cli.records`` and what that module
needs, not the album, user, worker or server commands: :func:`app_for` builds the root with
that one group from :data:`GROUPS`. Anything else (``--help``, a root command such as
``serve``, a mistyped name that deserves a "did you mean") runs the whole app of
:mod:`conveyor.cli.app`, which registers every group of the same table.
"""

from __future__ import annotations

import copy
import importlib
import sys
import traceback
from collections.abc import Sequence
from typing import Annotated

import typer

from conveyor.cli.exits import SUMMARY, ExitCode
from conveyor.cli.groups import CommandGroup, LogLevel, Quiet, Verbose, hear
from conveyor.cli.output import err_console, fail

__all__ = ["GROUPS", "app_for", "group", "main", "root"]

#: Group name → (module, attribute) of its :class:`CommandGroup`, in the order help lists them.
#: ``albums`` is taken from :mod:`conveyor.cli.sharing`, which adds the sharing commands to the
#: albums group of :mod:`conveyor.cli.media`.
GROUPS: dict[str, tuple[str, str]] = {
    "records": ("conveyor.cli.records", "app"),
    "albums": ("conveyor.cli.sharing", "albums_app"),
    "media": ("conveyor.cli.media", "media_app"),
    "users": ("conveyor.cli.users", "users_app"),
    "tokens": ("conveyor.cli.users", "tokens_app"),
    "vocabulary": ("conveyor.cli.vocabulary", "vocabulary_app"),
    "storage": ("conveyor.cli.storage", "storage_app"),
    "workers": ("conveyor.cli.workers", "workers_app"),
    "lanes": ("conveyor.cli.workers", "lanes_app"),
    "db": ("conveyor.cli.database", "db_app"),
}

root = CommandGroup(
    help="Conveyor: a self-hosted media pipeline (transcripts, photo and video variants).",
    epilog="Exit codes: "
    + "; ".join(f"{int(code)} {words}" for code, words in SUMMARY.items())
    + ". Reference: docs/cli.md.",
    pretty_exceptions_enable=False,
)


def _print_version(value: bool) -> None:
    if value:
        from conveyor import __version__

        print(f"conveyor {__version__}")
        raise typer.Exit()


@root.callback()
def _root(
    version: Annotated[
        bool,
        typer.Option(
            "--version", help="Print the version and exit.", callback=_print_version, is_eager=True
        ),
    ] = False,
    quiet: Quiet = False,
    verbose: Verbose = 0,
    log_level: LogLevel = None,
) -> None:
    """Conveyor: a self-hosted media pipeline (transcripts, photo and video variants)."""
    hear(quiet, verbose, log_level)


def group(name: str) -> typer.Typer:
    """The command group ``name`` of :data:`GROUPS`, its module imported now.

    Raises:
        KeyError: no group has that name.
    """
    module, attribute = GROUPS[name]
    found: typer.Typer = getattr(importlib.import_module(module), attribute)
    return found


def app_for(argv: Sequence[str]) -> typer.Typer:
    """The app to run ``argv`` (the words after ``conveyor``) with.

    When the first word that is not a root option names a command group (``records`` in
    ``conveyor -q records list``), the root with that group alone, its module the only command
    module imported, so Typer turns only that group's commands into click commands; otherwise
    the whole app (root help, root commands, and the suggestions for a mistyped name).
    """
    words = iter(argv)
    for word in words:
        if word == "--log-level":
            next(words, None)  # its value
        elif not word.startswith("-"):
            break
    else:
        return _whole()
    if word not in GROUPS:
        return _whole()
    pruned = copy.copy(root)
    pruned.registered_groups = []
    pruned.registered_commands = []
    pruned.add_typer(group(word), name=word)
    return pruned


def _whole() -> typer.Typer:
    from conveyor.cli.app import app

    return app


def _exit_for(exc: Exception) -> int:
    """Print what went wrong for an error no command caught, and return the exit code."""
    from conveyor.errors import ConfigError, Conflict, NotFound, RejectedInput

    if isinstance(exc, NotFound):
        fail(str(exc), ExitCode.NOT_FOUND)
        return ExitCode.NOT_FOUND
    if isinstance(exc, Conflict):
        fail(str(exc), ExitCode.CONFLICT)
        return ExitCode.CONFLICT
    if isinstance(exc, (ConfigError, RejectedInput)):
        fail(str(exc), ExitCode.USAGE)
        return ExitCode.USAGE
    if type(exc).__module__.startswith("sqlalchemy"):
        from sqlalchemy.exc import DBAPIError

        if (isinstance(exc, DBAPIError) and exc.connection_invalidated) or _is_connection(exc):
            detail = str(getattr(exc, "orig", exc)).strip().splitlines()
            fail(
                f"the database stopped answering: {detail[0] if detail else exc}; check that "
                "it is running, then run the command again",
                ExitCode.UNAVAILABLE,
            )
            return ExitCode.UNAVAILABLE
    if type(exc).__module__ == "sqlite3" and type(exc).__name__ == "OperationalError":
        # The embedded database's own driver error (a commit goes to the driver directly, so
        # SQLAlchemy does not wrap it): its disk is full or failing, not a fault of Conveyor.
        detail = str(exc).strip().splitlines()
        fail(
            f"the embedded database failed: {detail[0] if detail else type(exc).__name__}; "
            "check that its folder is writable and its disk has free space, then run the "
            "command again",
            ExitCode.UNAVAILABLE,
        )
        return ExitCode.UNAVAILABLE
    from conveyor.pipeline.redact import redact

    err_console.print(redact("".join(traceback.format_exception(exc))) or "", style="dim")
    fail(
        f"unexpected {type(exc).__name__} (a fault of Conveyor; the traceback above says where)",
        ExitCode.INTERNAL,
    )
    return ExitCode.INTERNAL


def _is_connection(exc: Exception) -> bool:
    from sqlalchemy.exc import InterfaceError, OperationalError

    return isinstance(exc, (OperationalError, InterfaceError))


def main() -> None:
    """Console-script entry point: run the command and map what escaped it to an exit code."""
    from conveyor.cli.settings import close_connections
    from conveyor.cli.signals import interrupt_exits, interrupted_early

    interrupt_exits()  # until a long command installs its graceful stop
    try:
        app_for(sys.argv[1:])()
    except SystemExit as exc:
        if exc.code in (0, None) and interrupted_early():
            # The Ctrl-C's own exit was swallowed (raised in a finalizer); a script still
            # learns the command was interrupted.
            sys.exit(ExitCode.INTERRUPTED)
        raise
    except BrokenPipeError:
        # The reader of a pipe went away (``conveyor records list | head``): not an error.
        sys.stderr.close()
        sys.exit(0)
    except Exception as exc:
        sys.exit(_exit_for(exc))
    finally:
        close_connections()
