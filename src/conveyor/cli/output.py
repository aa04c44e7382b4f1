"""How every command speaks: stdout for data, stderr for people, one table style, logging.

Output rules (one style for every command):

* data and results on stdout; progress, notes and errors on stderr;
* user and data text (names, titles, halt texts, settings in brackets) is printed literally:
  the consoles never interpret Rich markup, so ``[pipeline] workers`` stays as written;
* ``--json`` prints plain JSON (no colour, no wrapping);
* every error names the thing and the next step, and its exit code is an :class:`ExitCode`.
"""

from __future__ import annotations

import json
import logging
import sys
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.console import Console
from rich.table import Table
from rich.text import Text

from conveyor.cli.exits import ExitCode

if TYPE_CHECKING:
    from rich.progress import Progress

__all__ = [
    "JsonOption",
    "StageLines",
    "console",
    "err_console",
    "fail",
    "note",
    "print_json",
    "print_json_line",
    "progress_display",
    "redact",
    "setup_logging",
    "table",
    "voice",
]


class _StdoutConsole(Console):
    """Stdout's console. When its reader goes away (``| head -1``), a command that stops on a
    closed stdout (``records add``, ``media add``) stops as on Ctrl-C and says so on stderr
    (:func:`conveyor.cli.signals.stdout_closed`); any other ends as Rich ends it (exit 1)."""

    def on_broken_pipe(self) -> None:
        from conveyor.cli import signals

        if not signals.stops_on_closed_stdout():
            super().on_broken_pipe()
        self.quiet = True  # the rest of the cards goes nowhere, as Rich's own handling does
        signals.stdout_closed()


console = _StdoutConsole(
    soft_wrap=True, width=None if sys.stdout.isatty() else 10_000, markup=False, highlight=False
)
err_console = Console(
    stderr=True,
    soft_wrap=True,
    width=None if sys.stderr.isatty() else 10_000,
    markup=False,
    highlight=False,
)


@dataclass
class Voice:
    """How much this run says, from the shared options (``-q``, ``-v``, ``--log-level``)."""

    quiet: bool = False
    """``-q``: notes (where data lives, progress, hints) are not printed; errors still are."""
    verbosity: int = 0
    """``-v`` given this many times: 1 logs info, 2 debug."""
    log_level: str | None = None
    """``--log-level``: the log level by name; wins over ``-v``."""

    def level(self, default: int) -> int:
        """The log level to use where the command's own default is ``default``."""
        if self.log_level is not None:
            return logging.getLevelNamesMapping()[self.log_level]
        if self.verbosity >= 2:
            return logging.DEBUG
        if self.verbosity == 1:
            return min(default, logging.INFO)
        return logging.ERROR if self.quiet else default


#: This run's voice: set while the command line is parsed, read by :func:`note` and logging.
voice = Voice()


def redact(text: str) -> str:
    """``text`` with credentials hidden (D16); the one place every printed line passes."""
    from conveyor.pipeline.redact import redact as hide_credentials

    return hide_credentials(text) or ""


def fail(message: str, code: int = ExitCode.HALTED) -> typer.Exit:
    """Print ``error: message`` on stderr (credentials redacted) and return the Exit to raise."""
    err_console.print(Text.assemble(("error: ", "bold red"), redact(message)))
    return typer.Exit(int(code))


def note(message: str) -> None:
    """A line for the person at the terminal, on stderr (never mixed into the data on stdout);
    nothing under ``-q``."""
    if voice.quiet:
        return
    err_console.print(Text(redact(message), style="dim"))


#: The ``--json`` option of every command that lists or produces something.
JsonOption = Annotated[
    bool,
    typer.Option("--json", help="Print JSON for scripts (the schema is in docs/cli.md)."),
]


def print_json(document: Any) -> None:
    """Print ``document`` as plain, indented JSON on stdout (no colour, no wrapping)."""
    sys.stdout.write(json.dumps(document, indent=2, ensure_ascii=False) + "\n")
    sys.stdout.flush()


def print_json_line(document: Any) -> None:
    """Print ``document`` as one line of JSON on stdout, flushed (a stream's next object)."""
    sys.stdout.write(json.dumps(document, ensure_ascii=False) + "\n")
    sys.stdout.flush()


#: What an empty cell shows, so that ``awk`` and ``cut`` count the same columns on every row.
EMPTY = "-"


class _Rows(Table):
    """A table whose empty cells show :data:`EMPTY`, and whose text cells show a newline, a tab
    or another control character escaped (``a\\nb``), as file names are: an album name or title
    with a newline in it would otherwise split its row in two."""

    def add_row(self, *cells: Any, **kwargs: Any) -> None:
        from conveyor.names import readable

        shown = [
            (readable(cell) if isinstance(cell, str) else cell)
            if cell is not None and cell != ""
            else EMPTY
            for cell in cells
        ]
        shown = [Text(EMPTY) if isinstance(c, Text) and not c.plain else c for c in shown]
        super().add_row(*shown, **kwargs)


def table(*headers: str) -> Table:
    """The one table style: plain columns, bold headers, no box lines (greppable in a pipe);
    an empty cell shows ``-``."""
    return _Rows(*headers, box=None, header_style="bold", pad_edge=False, padding=(0, 2, 0, 0))


class _IsoUtcFormatter(logging.Formatter):
    """``2026-11-30T07:40:00.123Z WARNING record 7 halted …``, credentials redacted (D16)."""

    def formatTime(self, record: logging.LogRecord, datefmt: str | None = None) -> str:
        seconds = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
        return f"{seconds}.{int(record.msecs):03d}Z"

    def format(self, record: logging.LogRecord) -> str:
        return redact(super().format(record))


def setup_logging(level: int = logging.INFO) -> None:
    """Log to stderr, one line per event, time in ISO 8601 UTC like every other time we print.

    ``level`` is the command's default; ``-v``, ``-q`` and ``--log-level`` change it."""
    level = voice.level(level)
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(_IsoUtcFormatter("%(asctime)s %(levelname)s %(message)s"))
    logging.basicConfig(level=level, handlers=[handler], force=True)
    # libvips reports every damaged tile as a warning; the step's halt reason already says it.
    logging.getLogger("pyvips").setLevel(logging.ERROR)
    logging.getLogger("alembic").setLevel(logging.WARNING)


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
        if self._plain and not voice.quiet:
            err_console.print(Text(f"{self._noun} {thing_id}: {state}"))


def progress_display(state_field: str) -> Progress:
    """The progress display of the commands that wait for work: on stderr, gone when done;
    none under ``-q``."""
    from rich.progress import BarColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

    return Progress(
        SpinnerColumn(),
        TextColumn("{task.description}", markup=False),
        BarColumn(),
        TextColumn(f"{{task.fields[{state_field}]}}", markup=False),
        TimeElapsedColumn(),
        console=err_console,
        transient=True,
        disable=voice.quiet,
    )
