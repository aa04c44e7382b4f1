"""Exit codes of the ``conveyor`` command, one per situation a script may want to tell apart.

The table is documented in ``docs/cli.md`` (a test keeps the two in step).
"""

from __future__ import annotations

from enum import IntEnum

__all__ = ["SUMMARY", "ExitCode"]


class ExitCode(IntEnum):
    """What the exit status of a ``conveyor`` command means."""

    OK = 0
    """Success: every file was accepted and every record finished (or the action was done)."""
    HALTED = 1
    """Some files were refused, or some records or items halted (records handed to a worker,
    with none run by the command itself, are not a failure)."""
    USAGE = 2
    """Usage or configuration: a bad option or argument, an invalid setting, a busy port."""
    NOT_FOUND = 3
    """No such record, item, album, user or token."""
    CONFLICT = 4
    """The action does not fit the state: resuming what is not halted, a name already taken."""
    UNAVAILABLE = 5
    """The database or the storage cannot be reached or used."""
    SCHEMA = 6
    """The database schema is not the one this version uses: run ``conveyor db upgrade``."""
    MISSING_OBJECTS = 8
    """``storage check``: journal rows whose object is not in the store. The three storage
    check codes are bits: several kinds found exit with their sum (8 + 32 = 40)."""
    SIZE_MISMATCHES = 16
    """``storage check``: journal rows whose object has another size."""
    ORPHANS = 32
    """``storage check``: objects older than ``[storage] sweep_grace`` without a journal row
    (``conveyor storage sweep`` removes them)."""
    INTERNAL = 70
    """A fault of Conveyor itself (a bug); the message and the traceback say where."""
    INTERRUPTED = 130
    """Stopped by SIGINT or SIGTERM before the work was finished."""
    PIPE_CLOSED = 141
    """``records add``, ``media add``: stdout's reader went away (``| head -1``, a script that
    stopped reading ``--json``), which stops the run as Ctrl-C does (128 + SIGPIPE, what a
    shell reports for a command SIGPIPE ended): what was accepted is kept with its records,
    the rest is not tried, and the summary goes to stderr."""


#: The exit codes in a few words each, for ``conveyor --help``.
SUMMARY: dict[ExitCode, str] = {
    ExitCode.OK: "success",
    ExitCode.HALTED: "some files refused or records halted",
    ExitCode.USAGE: "usage or configuration",
    ExitCode.NOT_FOUND: "not found",
    ExitCode.CONFLICT: "conflict",
    ExitCode.UNAVAILABLE: "database or storage unavailable",
    ExitCode.SCHEMA: "schema not current (conveyor db upgrade)",
    ExitCode.MISSING_OBJECTS: "storage check: objects missing",
    ExitCode.SIZE_MISMATCHES: "storage check: sizes differ",
    ExitCode.ORPHANS: "storage check: orphans (codes 8, 16, 32 add up)",
    ExitCode.INTERNAL: "internal fault",
    ExitCode.INTERRUPTED: "interrupted",
    ExitCode.PIPE_CLOSED: "stdout closed by its reader",
}
