"""What every command shares: settings, runtime, logging, stop signals, output helpers."""

from __future__ import annotations

import logging
import signal
import sys
import threading
import tomllib
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import typer
from pydantic import ValidationError
from rich.console import Console
from rich.logging import RichHandler
from rich.markup import escape
from rich.progress import BarColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

from conveyor.config import load_settings
from conveyor.errors import RejectedInput
from conveyor.runtime import Runtime

__all__ = [
    "accept_files",
    "console",
    "describe_validation",
    "err_console",
    "fail",
    "make_runtime",
    "progress_display",
    "setup_logging",
    "stop_on_signals",
]

# Output that goes to a file or a pipe is not wrapped at 80 columns: a transcript stays one line.
console = Console(soft_wrap=True, width=None if sys.stdout.isatty() else 10_000)
err_console = Console(stderr=True)


def fail(message: str, code: int = 1) -> typer.Exit:
    """Print ``message`` in red on stderr and return the Exit to raise."""
    err_console.print(f"[red]error:[/red] {message}")
    return typer.Exit(code)


def setup_logging(level: int = logging.INFO) -> None:
    """Log to stderr through Rich."""
    logging.basicConfig(
        level=level,
        format="%(message)s",
        handlers=[RichHandler(console=err_console, show_path=False, rich_tracebacks=False)],
        force=True,
    )
    # libvips reports every damaged tile as a warning; the step's halt reason already says it.
    logging.getLogger("pyvips").setLevel(logging.ERROR)
    logging.getLogger("alembic").setLevel(logging.WARNING)


def make_runtime(migrate: bool = True) -> Runtime:
    """Read settings once and build the runtime; migrate the schema unless told not to.

    Raises:
        typer.Exit: the settings are invalid (code 2) or the database is unreachable (code 1).
    """
    try:
        settings = load_settings()
    except ValidationError as exc:
        raise fail(f"invalid configuration: {describe_validation(exc)}", 2) from None
    except (FileNotFoundError, tomllib.TOMLDecodeError) as exc:
        raise fail(f"invalid configuration: {exc}", 2) from None
    runtime = Runtime(settings)
    try:
        runtime.store  # noqa: B018 - creates the storage folder, so a bad root fails here
    except OSError as exc:
        root = settings.storage.root
        raise fail(f"cannot use [storage] root {root} as the storage folder: {exc}", 2) from None
    if migrate:
        try:
            runtime.migrate()
        except Exception as exc:
            raise fail(f"cannot prepare the database {settings.database.url}: {exc}") from None
    return runtime


def describe_validation(exc: ValidationError) -> str:
    """One line per invalid setting: ``pipeline.workers: Input should be … (got 'abc')``."""
    lines = []
    for error in exc.errors():
        where = ".".join(str(part) for part in error["loc"])
        got = f" (got {error['input']!r})" if error["type"] != "missing" else ""
        lines.append(f"{where}: {error['msg']}{got}")
    return "\n  " + "\n  ".join(lines)


def stop_on_signals() -> threading.Event:
    """An event set by SIGINT or SIGTERM (graceful stop); a second SIGINT aborts at once."""
    stop = threading.Event()

    def handler(signum: int, _frame: Any) -> None:
        if stop.is_set() and signum == signal.SIGINT:
            raise KeyboardInterrupt
        err_console.print(f"[yellow]{signal.Signals(signum).name}: stopping…[/yellow]")
        stop.set()

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


def accept_files(paths: Sequence[Path], accept: Callable[[Path], int]) -> tuple[list[int], int]:
    """Run ``accept`` on each path; a refusal is printed and counted, never fatal.

    Returns:
        The accepted ids in order, and how many paths were refused.
    """
    ids: list[int] = []
    refused = 0
    for path in paths:
        problem = _unreadable(path)
        try:
            if problem is None:
                ids.append(accept(path))
        except RejectedInput as exc:
            problem = f"refused ({exc.reason}): {exc}"
        except OSError as exc:
            problem = f"cannot be read: {exc.strerror or exc}"
        if problem is not None:
            err_console.print(f"[red]{escape(f'{path}: {problem}')}[/red]", highlight=False)
            refused += 1
    return ids, refused


def progress_display(state_field: str) -> Progress:
    """The progress display of the commands that wait for work: on stderr, gone when done."""
    return Progress(
        SpinnerColumn(),
        TextColumn("{task.description}"),
        BarColumn(),
        TextColumn(f"{{task.fields[{state_field}]}}"),
        TimeElapsedColumn(),
        console=err_console,
        transient=True,
    )
