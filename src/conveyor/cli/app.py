"""The ``conveyor`` command: ingest, worker, records, albums, media, serve, users, tokens, db.

Every command module imports only Typer at the top; what a command needs (SQLAlchemy, PyAV,
pyvips, the HTTP app) is imported when it runs, so ``--help`` and ``--version`` start fast.
"""

from __future__ import annotations

import copy
import logging
import sys
import traceback
from collections.abc import Sequence
from typing import Annotated

import typer

from conveyor import __version__
from conveyor.cli import media, records, users
from conveyor.cli.backup import backup, restore
from conveyor.cli.exits import SUMMARY, ExitCode
from conveyor.cli.groups import CommandGroup, LogLevel, Quiet, Verbose, hear
from conveyor.cli.ingest import ingest
from conveyor.cli.output import JsonOption, err_console, fail, note, print_json, setup_logging
from conveyor.cli.serve import serve
from conveyor.cli.settings import close_connections, make_runtime

# Registers `albums share`, `unshare`, `shares` and `albums link …` on the albums group.
from conveyor.cli.sharing import link_app as _link_app  # noqa: F401
from conveyor.cli.signals import stop_on_signals
from conveyor.cli.storage import storage_app
from conveyor.cli.vocabulary import vocabulary_app
from conveyor.cli.workers import lanes_app, workers_app

__all__ = ["app", "app_for", "main"]

app = CommandGroup(
    help="Conveyor: a self-hosted media pipeline (transcripts, photo and video variants).",
    epilog="Exit codes: "
    + "; ".join(f"{int(code)} {words}" for code, words in SUMMARY.items())
    + ". Reference: docs/cli.md.",
    pretty_exceptions_enable=False,
)
db_app = CommandGroup(help="The database schema.")
app.add_typer(records.app, name="records")
app.add_typer(media.albums_app, name="albums")
app.add_typer(media.media_app, name="media")
app.add_typer(users.users_app, name="users")
app.add_typer(users.tokens_app, name="tokens")
app.add_typer(vocabulary_app, name="vocabulary")
app.add_typer(storage_app, name="storage")
app.add_typer(workers_app, name="workers")
app.add_typer(lanes_app, name="lanes")
app.add_typer(db_app, name="db")
app.alias("ingest", ingest)  # `conveyor records add`, as `media add` adds to albums
app.command()(serve)
app.command()(backup)
app.command()(restore)


def _print_version(value: bool) -> None:
    if value:
        print(f"conveyor {__version__}")
        raise typer.Exit()


@app.callback()
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


@app.command()
def version(as_json: JsonOption = False) -> None:
    """Print the version."""
    if as_json:
        print_json({"version": __version__})
        return
    print(f"conveyor {__version__}")


@app.command()
def worker(
    lanes: Annotated[
        str | None,
        typer.Option(
            metavar="LANES",
            help="Serve only these lanes (comma-separated: audio, short, long); the others' "
            "records wait for a process that serves them. Default: every lane.",
        ),
    ] = None,
    workers: Annotated[
        int | None,
        typer.Option(
            metavar="N",
            help="Worker threads of the audio lane in this process; default [pipeline] "
            "workers. The photo and video lanes take [media] short_workers and long_workers.",
            min=0,
        ),
    ] = None,
    metrics_port: Annotated[
        int | None,
        typer.Option(
            metavar="PORT",
            help="Serve this process's Prometheus metrics at http://HOST:PORT/metrics "
            "(0 = any free port); default: no metrics endpoint.",
            min=0,
            max=65535,
        ),
    ] = None,
    metrics_host: Annotated[
        str, typer.Option(metavar="HOST", help="Address the metrics endpoint listens on.")
    ] = "127.0.0.1",
) -> None:
    """Run the workers of every lane (or of --lanes) until SIGINT/SIGTERM (running steps finish
    or are released)."""
    setup_logging(logging.INFO)
    serve = _parse_lanes(lanes)
    runtime = make_runtime()
    from conveyor.errors import ConfigError

    try:
        counts = runtime.lanes(serve)
    except ConfigError as exc:
        raise fail(str(exc), ExitCode.USAGE) from None
    if workers is not None:
        if "audio" not in counts:
            raise fail(
                "--workers sets the audio lane's workers, but --lanes does not serve audio",
                ExitCode.USAGE,
            )
        counts["audio"] = workers
    if counts.get("audio", 0) > 0:
        from conveyor.cli.startup import check_recognizer

        check_recognizer(runtime)
    stop = stop_on_signals()
    pool = runtime.pool(counts)
    registry = runtime.registry(pool)  # seen by `conveyor workers`; obeys pauses and drains

    def ready() -> tuple[bool, str]:
        if registry.id is None:
            return False, "not registered yet: the database does not answer"
        if registry.drain.is_set():
            return False, "draining"
        if stop.is_set() or pool.stopping:
            return False, "stopping"
        if not pool.running():
            return False, "a lane's worker thread is not running"
        return True, "lanes running: " + ", ".join(f"{k}={v}" for k, v in pool.lanes.items())

    probes = None
    if metrics_port is not None:
        from conveyor.cli.probes import ProbeServer

        try:
            probes = ProbeServer(runtime.engine, ready, metrics_port, metrics_host)
        except OSError as exc:
            raise fail(
                f"cannot serve metrics on {metrics_host}:{metrics_port}: {exc.strerror or exc}; "
                "choose another --metrics-port",
                ExitCode.USAGE,
            ) from None
        probes.start()
        where = f"http://{metrics_host}:{probes.port}"
        note(f"metrics at {where}/metrics (probes: {where}/healthz, {where}/readyz)")
    registry.start()
    pool.start()
    sweeper = runtime.sweeper()  # objects left without a journal row, soon and then hourly
    sweeper.start()
    job_sweeper = runtime.job_sweeper()  # recognizer job folders nothing will collect
    job_sweeper.start()
    from conveyor.cli.drain import wait_for_stop_or_drain

    wait_for_stop_or_drain(stop, registry, pool)
    job_sweeper.stop()
    sweeper.stop()
    pool.stop()
    registry.stop()
    if probes is not None:
        probes.stop()


def _parse_lanes(value: str | None) -> list[str] | None:
    """``--lanes audio,short`` → ``["audio", "short"]``; None when not given."""
    if value is None:
        return None
    names = [part.strip() for part in value.split(",") if part.strip()]
    if not names:
        raise fail("--lanes names no lane; give e.g. --lanes audio,short,long", ExitCode.USAGE)
    return names


@db_app.command("upgrade")
def db_upgrade(as_json: JsonOption = False) -> None:
    """Create the schema, or upgrade it to this version's (back up the database first)."""
    from sqlalchemy.exc import SQLAlchemyError

    from conveyor.cli.settings import database_unreachable, describe_database
    from conveyor.db.migrate import current_revision, head_revision, known_revision

    runtime = make_runtime(schema=False)
    try:
        before = current_revision(runtime.engine)
        if before is not None and not known_revision(before):
            raise fail(
                f"the database has schema revision {before}, newer than this version of "
                f"Conveyor knows (its newest is {head_revision()}); upgrade Conveyor",
                ExitCode.SCHEMA,
            )
        runtime.migrate()
        after = current_revision(runtime.engine)
    except SQLAlchemyError as exc:
        raise database_unreachable(runtime.settings, exc) from None
    where = describe_database(runtime.settings)
    if as_json:
        print_json({"database": where, "before": before, "after": after})
        return
    if before == after:
        print(f"database {where} already at revision {after}")
    else:
        print(f"database {where} upgraded from revision {before or 'none'} to {after}")


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


def app_for(argv: Sequence[str]) -> typer.Typer:
    """The app to run ``argv`` (the words after ``conveyor``) with.

    When the first word that is not a root option names a command group (``records`` in
    ``conveyor -q records list``), the root with that group alone, so Typer turns only that
    group's commands into click commands; otherwise the whole app (root help, root commands,
    and the suggestions for a mistyped name).
    """
    words = iter(argv)
    for word in words:
        if word == "--log-level":
            next(words, None)  # its value
        elif not word.startswith("-"):
            break
    else:
        return app
    named = [group for group in app.registered_groups if group.name == word]
    if not named:
        return app
    pruned = copy.copy(app)
    pruned.registered_groups = named
    pruned.registered_commands = []
    return pruned


def main() -> None:
    """Console-script entry point: run the command and map what escaped it to an exit code."""
    from conveyor.cli.signals import interrupt_exits

    interrupt_exits()  # until a long command installs its graceful stop
    try:
        app_for(sys.argv[1:])()
    except BrokenPipeError:
        # The reader of a pipe went away (``conveyor records list | head``): not an error.
        sys.stderr.close()
        sys.exit(0)
    except Exception as exc:
        sys.exit(_exit_for(exc))
    finally:
        close_connections()
