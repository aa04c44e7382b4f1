"""Intake: the files given to ``ingest`` or ``media add``, each accepted or refused, and the
last line that counts them."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from rich.text import Text

from conveyor.cli.output import err_console

if TYPE_CHECKING:
    from conveyor.errors import RejectedInput

__all__ = ["Intake", "accept_files", "summary"]


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
