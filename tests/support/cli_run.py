"""Running the ``conveyor`` command as a user does: a subprocess with a clean environment."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import typer
from typer.core import TyperCommand, TyperGroup
from typer.testing import CliRunner, Result

from conveyor.cli.app import app

CONVEYOR = str(Path(sys.executable).with_name("conveyor"))
ANSI = re.compile(r"\x1b\[")


def clean_env(**env: str) -> dict[str, str]:
    """``os.environ`` without any ``CONVEYOR_*`` setting of the test run, plus ``env``."""
    base = {k: v for k, v in os.environ.items() if not k.upper().startswith("CONVEYOR_")}
    return {**base, "COLUMNS": "200", **env}


def run(args: list[str], cwd: Path, **env: str) -> subprocess.CompletedProcess[str]:
    """``conveyor ARGS…`` in ``cwd`` with ``env`` (stdout and stderr are pipes)."""
    return subprocess.run(
        [CONVEYOR, *args],
        cwd=cwd,
        env=clean_env(**env),
        capture_output=True,
        text=True,
        timeout=600,
    )


def invoke(*args: str, **env: str) -> Result:
    """``conveyor ARGS…`` in this process, in the current folder, with a clean environment."""
    return CliRunner().invoke(app, list(args), env=clean_env(**env))


def commands() -> Iterator[tuple[str, TyperCommand]]:
    """Every leaf command as (``records show``, the command), generated from the code."""
    root = typer.main.get_command(app)

    def walk(prefix: str, command: object) -> Iterator[tuple[str, TyperCommand]]:
        if isinstance(command, TyperGroup):
            for name, sub in sorted(command.commands.items()):
                yield from walk(f"{prefix} {name}".strip(), sub)
        else:
            assert isinstance(command, TyperCommand), (prefix, command)
            yield prefix, command

    yield from walk("", root)
