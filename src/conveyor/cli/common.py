"""What every command shares: output, settings and runtime, logging, stop signals, intake.

Output rules (one style for every command):

* data and results on stdout; progress, notes and errors on stderr;
* user and data text (names, titles, halt texts, settings in brackets) is printed literally:
  the consoles never interpret Rich markup, so ``[pipeline] workers`` stays as written;
* ``--json`` prints plain JSON (no colour, no wrapping), one document per command;
* every error names the thing and the next step, and its exit code is an :class:`ExitCode`.

Heavy modules (SQLAlchemy, PyAV, pyvips, the API) are imported inside the functions that need
them, so ``conveyor --help`` and ``--version`` start fast.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import re
import signal
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer
from rich.console import Console
from rich.table import Table
from rich.text import Text

from conveyor.cli.exits import ExitCode

if TYPE_CHECKING:
    from rich.progress import Progress

    from conveyor.config import Settings
    from conveyor.errors import RejectedInput
    from conveyor.runtime import Runtime

__all__ = [
    "MAX_ID",
    "Intake",
    "accept_files",
    "check_schema",
    "console",
    "database_unreachable",
    "describe_database",
    "describe_storage",
    "err_console",
    "fail",
    "human_size",
    "make_runtime",
    "no_such_id",
    "note",
    "print_json",
    "progress_display",
    "setup_logging",
    "stop_on_signals",
    "summary",
    "table",
]

# Output that goes to a file or a pipe is not wrapped at 80 columns: a transcript stays one line.
console = Console(
    soft_wrap=True, width=None if sys.stdout.isatty() else 10_000, markup=False, highlight=False
)
err_console = Console(
    stderr=True,
    soft_wrap=True,
    width=None if sys.stderr.isatty() else 10_000,
    markup=False,
    highlight=False,
)

#: The largest id a record, item, album, user or token can have (a signed 64-bit column).
MAX_ID = 2**63 - 1


def _redact(text: str) -> str:
    from conveyor.pipeline.redact import redact

    return redact(text) or ""


def fail(message: str, code: int = ExitCode.HALTED) -> typer.Exit:
    """Print ``error: message`` on stderr (credentials redacted) and return the Exit to raise."""
    err_console.print(Text.assemble(("error: ", "bold red"), _redact(message)))
    return typer.Exit(int(code))


def note(message: str) -> None:
    """A line for the person at the terminal, on stderr (never mixed into the data on stdout)."""
    err_console.print(Text(_redact(message), style="dim"))


def print_json(document: Any) -> None:
    """Print ``document`` as plain, indented JSON on stdout (no colour, no wrapping)."""
    sys.stdout.write(json.dumps(document, indent=2, ensure_ascii=False) + "\n")
    sys.stdout.flush()


def table(*headers: str) -> Table:
    """The one table style: plain columns, bold headers, no box lines (greppable in a pipe)."""
    return Table(*headers, box=None, header_style="bold", pad_edge=False, padding=(0, 2, 0, 0))


def human_size(size: int | None) -> str:
    """Bytes for a person: ``912 B``, ``14.2 KiB``, ``3.1 MiB``, ``1.2 GiB`` (binary units)."""
    if size is None:
        return ""
    if size < 1024:
        return f"{size} B"
    value = float(size)
    for unit in ("KiB", "MiB", "GiB"):
        value /= 1024
        if value < 1024 or unit == "GiB":
            return f"{value:.1f} {unit}"
    raise AssertionError("unreachable")  # pragma: no cover


def no_such_id(noun: str, value: int) -> typer.Exit | None:
    """The not-found Exit for an id that no row can have (0, or past 64 bits), else None."""
    if 1 <= value <= MAX_ID:
        return None
    return fail(f"{noun} {value} does not exist", ExitCode.NOT_FOUND)


class _IsoUtcFormatter(logging.Formatter):
    """``2026-11-30T07:40:00.123Z WARNING record 7 halted …``, credentials redacted (D16)."""

    def formatTime(self, record: logging.LogRecord, datefmt: str | None = None) -> str:
        seconds = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
        return f"{seconds}.{int(record.msecs):03d}Z"

    def format(self, record: logging.LogRecord) -> str:
        return _redact(super().format(record))


def setup_logging(level: int = logging.INFO) -> None:
    """Log to stderr, one line per event, time in ISO 8601 UTC like every other time we print."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(_IsoUtcFormatter("%(asctime)s %(levelname)s %(message)s"))
    logging.basicConfig(level=level, handlers=[handler], force=True)
    # libvips reports every damaged tile as a warning; the step's halt reason already says it.
    logging.getLogger("pyvips").setLevel(logging.ERROR)
    logging.getLogger("alembic").setLevel(logging.WARNING)


def describe_database(settings: Settings) -> str:
    """``[database] url`` for people: the password hidden, a SQLite file as an absolute path."""
    from sqlalchemy.engine import make_url

    url = make_url(settings.database.url)
    if url.get_backend_name() == "sqlite" and url.database and url.database != ":memory:":
        url = url.set(database=str(Path(url.database).resolve()))
    return url.render_as_string(hide_password=True)


def describe_storage(settings: Settings) -> str:
    """The object store for people: a folder as an absolute path, a bucket URL with its
    endpoint; never a key (D16)."""
    storage = settings.storage
    url = str(getattr(storage, "url", "file:") or "file:")
    if url == "file:":
        return str(storage.root.resolve())
    if url.startswith("file:"):
        return str(Path(url.removeprefix("file:")).resolve())
    endpoint = getattr(storage, "endpoint", None)
    shown = _redact(url)
    return f"{shown} at {_redact(str(endpoint))}" if endpoint else shown


def _load_settings() -> Settings:
    import tomllib

    from pydantic import ValidationError

    from conveyor.config import load_settings
    from conveyor.errors import ConfigError

    try:
        return load_settings()
    except ValidationError as exc:
        raise fail(f"invalid configuration: {_describe_validation(exc)}", ExitCode.USAGE) from None
    except (ConfigError, FileNotFoundError, tomllib.TOMLDecodeError) as exc:
        raise fail(f"invalid configuration: {exc}", ExitCode.USAGE) from None


#: Settings whose value is never echoed back, even when it is invalid (D16).
_SECRET_KEY = re.compile(r"secret|password|passwd|token|access_key|api_key|credential", re.I)


def _describe_validation(exc: Any) -> str:
    """One line per invalid setting: ``pipeline.workers: Input should be … (got 'abc')``."""
    lines = []
    for error in exc.errors():
        where = ".".join(str(part) for part in error["loc"])
        shown = "***" if _SECRET_KEY.search(where) else repr(error["input"])
        got = f" (got {shown})" if error["type"] != "missing" else ""
        lines.append(f"{where}: {error['msg']}{got}")
    return "\n  " + "\n  ".join(lines)


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
    from conveyor.runtime import Runtime

    note(f"database {describe_database(settings)}, storage {describe_storage(settings)}")
    runtime = Runtime(settings)
    try:
        runtime.store.check()  # creates the storage folder, so a bad root fails here
    except OSError as exc:
        if settings.storage.url.startswith("s3://"):
            raise fail(
                f"cannot use the bucket of [storage] url: {exc}; check [storage] endpoint, "
                "region, path_style and the credential (AWS_ACCESS_KEY_ID / "
                "AWS_SECRET_ACCESS_KEY or [storage] access_key_id / secret_access_key)",
                ExitCode.UNAVAILABLE,
            ) from None
        raise fail(
            f"cannot use [storage] root {settings.storage.root} as the storage folder: "
            f"{exc.strerror or exc}; point [storage] root (CONVEYOR_STORAGE__ROOT) at a folder "
            "this user can write",
            ExitCode.UNAVAILABLE,
        ) from None
    if schema:
        check_schema(runtime)
    return runtime


def database_unreachable(settings: Settings, exc: BaseException) -> typer.Exit:
    """The Exit for a database that does not answer (the URL's password never shown)."""
    detail = str(getattr(exc, "orig", None) or exc).strip().splitlines()
    return fail(
        f"cannot reach the database {describe_database(settings)}: "
        f"{detail[0] if detail else type(exc).__name__}; check [database] url "
        "(CONVEYOR_DATABASE__URL) and that the server is running",
        ExitCode.UNAVAILABLE,
    )


def check_schema(runtime: Runtime) -> None:
    """Upgrade an embedded SQLite schema; refuse a PostgreSQL schema that is not current.

    Raises:
        typer.Exit: :attr:`ExitCode.UNAVAILABLE` or :attr:`ExitCode.SCHEMA`.
    """
    from sqlalchemy.exc import SQLAlchemyError

    from conveyor.db.engine import is_postgresql
    from conveyor.db.migrate import current_revision, head_revision, known_revision

    where = describe_database(runtime.settings)
    try:
        current = current_revision(runtime.engine)
        head = head_revision()
        if current is not None and not known_revision(current):
            raise fail(
                f"the database {where} has schema revision {current}, newer than this version "
                f"of Conveyor knows (its newest is {head}); upgrade Conveyor",
                ExitCode.SCHEMA,
            )
        if current == head:
            return
        if not is_postgresql(runtime.engine):
            runtime.migrate()  # the embedded default upgrades itself
            return
    except SQLAlchemyError as exc:
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


def stop_on_signals() -> threading.Event:
    """An event set by SIGINT or SIGTERM (graceful stop); a second SIGINT aborts at once."""
    stop = threading.Event()

    def handler(signum: int, _frame: Any) -> None:
        if stop.is_set() and signum == signal.SIGINT:
            raise KeyboardInterrupt
        stop.set()
        # A handler runs between any two bytecodes of the main thread, possibly inside a Rich
        # render or a half-finished import; one raw write re-enters neither.
        with contextlib.suppress(OSError):  # stderr closed: stopping matters more than saying so
            os.write(2, f"{signal.Signals(signum).name}: stopping…\n".encode())

    signal.signal(signal.SIGINT, handler)
    signal.signal(signal.SIGTERM, handler)
    return stop


def _unreadable(path: Path) -> str | None:
    """Why ``path`` cannot be accepted, or None when it is a regular file."""
    if not path.exists():
        return "no such file"
    if path.is_dir():
        return "is a directory, not a file to add"
    if not path.is_file():
        return "is not a regular file"
    return None


@dataclass
class Intake:
    """What happened to the files given to ``ingest`` or ``media add``."""

    ids: list[int] = field(default_factory=list)
    refused: int = 0


def accept_files(
    paths: Sequence[Path],
    accept: Callable[[Path], int],
    hint: Callable[[Path, RejectedInput], str | None] | None = None,
) -> Intake:
    """Run ``accept`` on each path; a refusal is printed (with ``hint``) and counted, never fatal.

    Returns:
        The accepted ids in order, and how many paths were refused.
    """
    from conveyor.errors import RejectedInput

    intake = Intake()
    for path in paths:
        problem = _unreadable(path)
        try:
            if problem is None:
                intake.ids.append(accept(path))
        except RejectedInput as exc:
            problem = f"refused ({exc.reason}): {exc}"
            extra = hint(path, exc) if hint is not None else None
            if extra:
                problem = f"{problem}; {extra}"
        except OSError as exc:
            problem = f"cannot be read: {exc.strerror or exc}"
        if problem is not None:
            err_console.print(Text(f"{path}: {problem}", style="red"))
            intake.refused += 1
    return intake


def summary(
    noun: str, given: int, intake: Intake, done: int, halted: int, *, deleted: int = 0
) -> str:
    """``3 files: 2 accepted (1 done, 1 halted), 1 refused`` — the last line of an intake.

    ``deleted`` counts accepted ones deleted while the command waited on them.
    """
    waiting = len(intake.ids) - done - halted - deleted
    parts = [f"{done} done", f"{halted} halted"] + ([f"{waiting} unfinished"] if waiting else [])
    parts += [f"{deleted} deleted meanwhile"] if deleted else []
    files = "file" if given == 1 else "files"
    return (
        f"{given} {files}: {len(intake.ids)} accepted as {noun}s ({', '.join(parts)}), "
        f"{intake.refused} refused"
    )


class StageLines:
    """Plain progress for a stderr that is not a terminal: one line per change of state.

    The live progress bar draws only on a terminal; piped or logged, a long run would print
    nothing until the end. There each record's new stage (or halt) is printed once instead,
    ``record 7: normalized``; on a terminal this prints nothing (the bar shows it).
    """

    def __init__(self, noun: str) -> None:
        self._noun = noun
        self._shown: dict[int, str] = {}
        self._plain = not err_console.is_terminal

    def show(self, thing_id: int, state: str) -> None:
        """Print ``<noun> <id>: <state>`` if the state changed since it was last shown."""
        if self._shown.get(thing_id) == state:
            return
        self._shown[thing_id] = state
        if self._plain:
            err_console.print(Text(f"{self._noun} {thing_id}: {state}"))


def progress_display(state_field: str) -> Progress:
    """The progress display of the commands that wait for work: on stderr, gone when done."""
    from rich.progress import BarColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

    return Progress(
        SpinnerColumn(),
        TextColumn("{task.description}", markup=False),
        BarColumn(),
        TextColumn(f"{{task.fields[{state_field}]}}", markup=False),
        TimeElapsedColumn(),
        console=err_console,
        transient=True,
    )
