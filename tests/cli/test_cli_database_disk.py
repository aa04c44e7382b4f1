"""The embedded database on a disk that cannot take it: exit code 5 with the database named and
what to check, never a traceback (exit code 70) from the SQLite driver's own error."""

from __future__ import annotations

import resource
import signal
import sqlite3
import subprocess
from pathlib import Path

from conveyor.cli.exits import ExitCode
from conveyor.cli.root import _exit_for
from tests.support.cli_run import CONVEYOR, clean_env


def _file_size_limit(limit: int) -> None:
    # A file system that takes no more than `limit` bytes per file: SQLite's writes past it fail
    # as on a full disk (the signal would kill the process instead).
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))


def test_a_new_embedded_database_on_a_full_disk_is_exit_5(tmp_path: Path) -> None:
    result = subprocess.run(
        [CONVEYOR, "records", "list"],
        cwd=tmp_path,
        env=clean_env(),
        capture_output=True,
        text=True,
        timeout=120,
        preexec_fn=lambda: _file_size_limit(64 * 1024),  # the schema needs more
    )
    assert result.returncode == ExitCode.UNAVAILABLE, result.stderr
    database = (tmp_path / "conveyor-data" / "conveyor.db").resolve()
    assert f"cannot reach the database sqlite:///{database}: " in result.stderr
    assert "its folder is writable and its disk has free space" in result.stderr
    assert "server is running" not in result.stderr  # a file has no server
    assert "Traceback" not in result.stderr


def test_the_sqlite_drivers_own_error_is_exit_5() -> None:
    # A commit goes to the driver directly (conveyor.db.engine), so a full disk at any later
    # write reaches the command as sqlite3's error, not SQLAlchemy's.
    full = sqlite3.OperationalError("database or disk is full")
    assert _exit_for(full) == ExitCode.UNAVAILABLE
