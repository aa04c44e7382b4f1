"""Settings and runtime for a command: read the configuration once, say where it reads and
writes, check the database schema.

SQLAlchemy, the runtime and the migrations are imported inside the functions that need them,
so ``conveyor --help`` starts fast.
"""

from __future__ import annotations

import logging
import os
import weakref
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from conveyor.cli import collector
from conveyor.cli.exits import ExitCode
from conveyor.cli.output import fail, note

if TYPE_CHECKING:
    from sqlalchemy import Engine

    from conveyor.config import Settings
    from conveyor.runtime import Runtime

__all__ = [
    "check_schema",
    "close_connections",
    "database_unreachable",
    "describe_database",
    "make_runtime",
]


log = logging.getLogger(__name__)

#: The engines of the runtimes this process's commands built, closed as the command ends.
_engines: weakref.WeakSet[Engine] = weakref.WeakSet()


def describe_database(settings: Settings) -> str:
    """``[database] url`` for people: the password hidden, a SQLite file as an absolute path."""
    from sqlalchemy.engine import make_url

    url = make_url(settings.database.url)
    if url.get_backend_name() == "sqlite" and url.database and url.database != ":memory:":
        url = url.set(database=str(Path(url.database).resolve()))
    return url.render_as_string(hide_password=True)


def _load_settings() -> Settings:
    from conveyor.config import load_settings
    from conveyor.errors import ConfigError
    from conveyor.providers.registry import backend_for, language_problem

    try:
        settings = load_settings()
        backend_for(settings.transcription)  # a provider the registry does not know
        problem = language_problem(settings.transcription)
        if problem:
            raise ConfigError(problem)
        return settings
    except ConfigError as exc:
        lines = str(exc).splitlines()
        shown = lines[0] if len(lines) == 1 else "\n  " + "\n  ".join(lines)
        raise fail(f"invalid configuration: {shown}", ExitCode.USAGE) from None


def _storage_origin(exc: ValueError) -> str:
    """Where the ``[storage]`` key a store's refusal names was set (``conveyor.toml line 3: ``),
    as the settings' own refusals say it; empty when the message names no key."""
    import re

    from conveyor.config import setting_origin

    key = re.match(r"\[storage\] (\w+)", str(exc))
    return setting_origin(("storage", key.group(1))) if key else ""


def make_runtime(*, schema: bool = True) -> Runtime:
    """Read settings once, say which database and storage are used, and build the runtime.

    Args:
        schema: check the database schema first: on SQLite it is upgraded in place; on
            PostgreSQL a schema other than this version's stops the command (upgrades there are
            an explicit ``conveyor db upgrade``).

    Raises:
        typer.Exit: invalid settings (:attr:`ExitCode.USAGE`), database or storage unusable
            (:attr:`ExitCode.UNAVAILABLE`), schema not current (:attr:`ExitCode.SCHEMA`).
    """
    settings = _load_settings()
    from conveyor.config import config_file
    from conveyor.objects import settings_hint, work_folder
    from conveyor.runtime import Runtime

    file = config_file()
    _log_sources(file)
    where = f"config {file.resolve()}, " if file is not None else ""
    where += f"database {describe_database(settings)}"
    runtime = Runtime(settings)
    try:
        store = runtime.store  # a folder is created here, so a bad root fails here
        # The store says where it is (a folder, a bucket and its endpoint; never a key, D16).
        note(f"{where}, storage {store.describe_location()}")
        store.check()
        # What a killed command or step left in its work folder goes now, not at the next
        # worker's start: a command that never needs a folder still clears the dead ones.
        work_folder(settings.storage).remove_dead()
    except ValueError as exc:  # the URL's backend refuses the rest of it
        raise fail(f"invalid configuration: {_storage_origin(exc)}{exc}", ExitCode.USAGE) from None
    except OSError as exc:
        reason = str(exc)
        if exc.strerror:  # the folder could not be made: the system's words and the path
            reason = f"{exc.strerror}: {exc.filename}" if exc.filename else exc.strerror
        raise fail(
            f"cannot use the storage: {reason}; {settings_hint(settings.storage)}",
            ExitCode.UNAVAILABLE,
        ) from None
    _engines.add(runtime.engine)  # closed as the command ends, whatever the schema says
    if schema:
        check_schema(runtime)
    collector.resume()  # the start is over: what the command makes from here is collected
    return runtime


def _log_sources(file: Path | None) -> None:
    """Say at debug (``-vv``) where the settings came from: the config file and why it was
    read, and the ``CONVEYOR_*`` variables that set keys, by name only (a value may be a
    secret, D16)."""
    if not log.isEnabledFor(logging.DEBUG):
        return
    if file is None:
        source = "no config file (CONVEYOR_CONFIG unset, no conveyor.toml here): defaults"
    elif os.environ.get("CONVEYOR_CONFIG"):
        source = f"config file {file.resolve()} (CONVEYOR_CONFIG)"
    else:
        source = f"config file {file.resolve()} (conveyor.toml in the working directory)"
    variables = sorted(
        name
        for name in os.environ
        if name.upper().startswith("CONVEYOR_")
        and name.upper() != "CONVEYOR_CONFIG"
        and not name.upper().startswith("CONVEYOR_TEST_")
    )
    log.debug("settings from %s; environment variables: %s", source, ", ".join(variables) or "none")


def close_connections() -> None:
    """Close the pooled database connections of every runtime :func:`make_runtime` built, as
    the command ends (an embedded database's ``-wal`` and ``-shm`` files go with its last
    connection), rather than leaving them to the collector at exit
    (:func:`conveyor.cli.collector.skip_at_exit`)."""
    for engine in list(_engines):
        engine.dispose()


def database_unreachable(settings: Settings, exc: BaseException) -> typer.Exit:
    """The Exit for a database that does not answer (the URL's password never shown)."""
    detail = str(getattr(exc, "orig", None) or exc).strip().splitlines()
    where = describe_database(settings)
    # An embedded file has no server to start: what fails it is its disk (full, read-only).
    what = (
        "that its folder is writable and its disk has free space"
        if where.startswith("sqlite")
        else "that the server is running"
    )
    return fail(
        f"cannot reach the database {where}: "
        f"{detail[0] if detail else type(exc).__name__}; check [database] url "
        f"(CONVEYOR_DATABASE__URL) and {what}",
        ExitCode.UNAVAILABLE,
    )


def check_schema(runtime: Runtime) -> None:
    """Upgrade an embedded SQLite schema; refuse a PostgreSQL schema that is not current.

    Raises:
        typer.Exit: :attr:`ExitCode.UNAVAILABLE` or :attr:`ExitCode.SCHEMA`.
    """
    import sqlite3

    from sqlalchemy.exc import SQLAlchemyError

    from conveyor.db.engine import is_postgresql
    from conveyor.db.migrate import current_revision, head_revision, known_revision, oldest_code

    where = describe_database(runtime.settings)
    try:
        current = current_revision(runtime.engine)
        head = head_revision()
        log.debug("database %s: schema revision %s, this version's %s", where, current, head)
        if current is not None and not known_revision(current):
            # A newer schema: this process may still run if the schema says code this old
            # works with it (migrations add before they remove; a rolling upgrade).
            floor = oldest_code(runtime.engine)
            if floor is not None and known_revision(floor):
                note(
                    f"the database {where} has schema revision {current}, newer than this "
                    f"version's {head}; it works with code from revision {floor} on, so this "
                    "process runs until its host is upgraded"
                )
                return
            needs = f" (it needs code from revision {floor} on)" if floor is not None else ""
            raise fail(
                f"the database {where} has schema revision {current}, newer than this version "
                f"of Conveyor knows (its newest is {head}){needs}; upgrade Conveyor",
                ExitCode.SCHEMA,
            )
        if current == head:
            return
        if not is_postgresql(runtime.engine):
            runtime.migrate()  # the embedded default upgrades itself
            return
    except (SQLAlchemyError, sqlite3.Error) as exc:
        # sqlite3's own errors: a revision that rebuilds tables speaks to the driver directly,
        # so a full disk there is the driver's "database or disk is full", not SQLAlchemy's.
        raise database_unreachable(runtime.settings, exc) from None
    if current is None:
        raise fail(
            f"the database {where} has no Conveyor schema yet; create it with "
            "`conveyor db upgrade`",
            ExitCode.SCHEMA,
        )
    raise fail(
        f"the database {where} has schema revision {current}, older than this version needs "
        f"({head}); back up the database, stop every conveyor process, then run "
        "`conveyor db upgrade`",
        ExitCode.SCHEMA,
    )
