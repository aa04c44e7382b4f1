"""Command registration: every ``conveyor`` command group is a :class:`CommandGroup`.

A command registered on one takes the shared options without declaring them:

* ``-q``/``--quiet``: no notes on stderr (where data is read and written, progress, hints);
  errors still print;
* ``-v``/``--verbose`` (twice: debug) and ``--log-level LEVEL``: how much the log says;
* ``-h`` as well as ``--help``.

The same options are accepted before the command, at every level and with the same meaning
(``conveyor -q records list``, ``conveyor records -q list``, ``conveyor albums link -v list``):
every group takes them in its callback (:func:`_group_options`). An old
spelling of a command stays usable as a hidden alias (:meth:`CommandGroup.alias`), so scripts
written against it keep working while help and docs show one verb per action.

To add a command: make or reuse a group, ``@group.command("name")`` a function, and register
the group on the root app in :mod:`conveyor.cli.app` with ``app.add_typer``.
"""

from __future__ import annotations

import functools
import inspect
import logging
import typing
from collections.abc import Callable
from typing import Annotated, Any, TypeVar

import typer

from conveyor.cli.output import setup_logging, voice

__all__ = [
    "HELP_OPTIONS",
    "LOG_LEVELS",
    "CommandGroup",
    "LogLevel",
    "Quiet",
    "Verbose",
    "hear",
]

F = TypeVar("F", bound=Callable[..., Any])

#: The help options of every command (click passes them down to subcommands).
HELP_OPTIONS: dict[str, Any] = {"help_option_names": ["-h", "--help"]}

#: Log levels ``--log-level`` accepts (any case).
LOG_LEVELS = ("debug", "info", "warning", "error")

Quiet = Annotated[
    bool,
    typer.Option("-q", "--quiet", help="Print only results and errors: no notes on stderr."),
]
Verbose = Annotated[
    int,
    typer.Option("-v", "--verbose", count=True, help="Log more: once for info, twice for debug."),
]
LogLevel = Annotated[
    str | None,
    typer.Option(
        "--log-level",
        metavar="LEVEL",
        help="Log at this level: debug, info, warning or error (wins over -v and -q).",
    ),
]

#: The names the shared options take in a wrapped command's signature (never a command's own).
_SHARED = ("shared_quiet", "shared_verbose", "shared_log_level")


def hear(quiet: bool, verbose: int, log_level: str | None) -> None:
    """Take the shared options into this run's :data:`~conveyor.cli.output.voice`.

    Raises:
        typer.BadParameter: ``log_level`` is not one of :data:`LOG_LEVELS` (exit code 2).
    """
    if log_level is not None:
        if log_level.strip().lower() not in LOG_LEVELS:
            raise typer.BadParameter(
                f"{log_level!r} is not one of {', '.join(LOG_LEVELS)}", param_hint="--log-level"
            )
        voice.log_level = log_level.strip().upper()
    voice.quiet = voice.quiet or quiet
    voice.verbosity = max(voice.verbosity, verbose)


def _group_options(quiet: Quiet = False, verbose: Verbose = 0, log_level: LogLevel = None) -> None:
    """A group's callback: the shared options given before its command (``records -q list``).

    Raises:
        typer.BadParameter: ``log_level`` is not one of :data:`LOG_LEVELS` (exit code 2).
    """
    hear(quiet, verbose, log_level)


def _with_shared_options(function: Callable[..., Any]) -> Callable[..., Any]:
    """``function`` as a command that also takes ``-q``, ``-v`` and ``--log-level``."""
    hints = typing.get_type_hints(function, include_extras=True)
    # The annotations are evaluated once (above), not again by ``eval_str``.
    signature = inspect.signature(function)
    signature = signature.replace(
        parameters=[
            p.replace(annotation=hints.get(p.name, p.annotation))
            for p in signature.parameters.values()
        ],
        return_annotation=hints.get("return", signature.return_annotation),
    )
    shared = [
        inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=default, annotation=kind)
        for name, kind, default in zip(
            _SHARED, (Quiet, Verbose, LogLevel), (False, 0, None), strict=True
        )
    ]

    @functools.wraps(function)
    def command(*args: Any, **kwargs: Any) -> Any:
        hear(*(kwargs.pop(name) for name in _SHARED))
        # Warnings by default; a command that logs more (worker, serve) sets its own default.
        setup_logging(logging.WARNING)
        return function(*args, **kwargs)

    command.__signature__ = signature.replace(  # type: ignore[attr-defined]
        parameters=[*signature.parameters.values(), *shared]
    )
    command.__annotations__ = {**hints, **{p.name: p.annotation for p in shared}}
    return command


class CommandGroup(typer.Typer):
    """A group of ``conveyor`` commands; each takes the shared options and ``-h``."""

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("no_args_is_help", True)
        kwargs.setdefault("context_settings", HELP_OPTIONS)
        # Plain help and usage errors: flags show no value, nothing is drawn in boxes, and a
        # pipe gets the same text as a terminal.
        kwargs.setdefault("rich_markup_mode", None)
        # The shared options before a command of this group; the root sets its own callback.
        kwargs.setdefault("callback", _group_options)
        super().__init__(**kwargs)

    def command(self, name: str | None = None, **kwargs: Any) -> Callable[[F], F]:
        """Register a command, as Typer's ``command`` does, with the shared options."""
        register = super().command(name, **kwargs)

        def decorator(function: F) -> F:
            register(_with_shared_options(function))
            return function

        return decorator

    def alias(self, old: str, function: Callable[..., Any]) -> None:
        """Keep ``old`` working as a hidden spelling of ``function``'s command."""
        self.command(old, hidden=True)(function)
