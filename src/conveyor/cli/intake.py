"""Intake: the files given to ``records add`` or ``media add``, each accepted or refused, and the
last line that counts them.

* Any name a file system gives is taken, valid UTF-8 or not; it is shown and kept with the
  record with each undecodable byte escaped (``caf\\xe9.wav``).
* A file the owner already has (the same bytes, by SHA-256) is said and not stored again, so
  running an interrupted command again makes no second copies; the run then waits for that
  record (item) as for one it accepted. ``--keep-duplicates`` adds it anyway. Each
  file is read and hashed once, as it is stored: the intake finds the owner's copy by the
  digest the store computed and removes what it stored (a rerun writes each file again and
  deletes it, rather than every new file being read and hashed twice).
* A stop signal (Ctrl-C, SIGTERM) ends intake between two files: the file being stored is
  finished (a second Ctrl-C waits for it too), so every stored object has its record, and the
  files not yet tried are counted. A closed stdout (``| head -1``) ends it the same way.
* A file that cannot be read is refused (exit 1, the others go on); a storage that cannot take
  it (a full disk, a bucket that refuses) stops intake as the storage failure it is (exit 5).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO

from rich.text import Text

from conveyor.cli.output import err_console, print_json_line
from conveyor.cli.signals import (
    holding_interrupts,
    interrupt_pending,
    stdout_closed,
    stdout_was_closed,
)
from conveyor.names import escaped_name, kept_name

if TYPE_CHECKING:
    from conveyor.errors import RejectedInput

__all__ = [
    "Accept",
    "Intake",
    "StorageFailed",
    "accept_files",
    "shown_name",
    "summary",
    "summary_event",
]

#: Bytes read from a source file at a time.
_CHUNK = 1024 * 1024

#: ``accept(chunks, name)`` stores one file's bytes under its shown name; returns the new id.
Accept = Callable[[Iterator[bytes], str], int]


def shown_name(path: Path | str) -> str:
    """``path`` whole, as text a terminal, a JSON reader and the database all take, in the
    kept form of :func:`conveyor.names.escaped_name` (``\\\\`` for a backslash, ``\\n``,
    ``\\xNN`` for a byte that is not UTF-8 or not printable), from which
    :func:`conveyor.names.name_bytes` gives the path's bytes back; the name kept with the file
    is :func:`conveyor.names.kept_name`, the same form as an HTTP upload's."""
    return escaped_name(os.fsencode(str(path)))


class _ReadFailed(Exception):
    """Reading the source file failed (told apart from writing the storage)."""

    def __init__(self, error: OSError) -> None:
        super().__init__(error.strerror or str(error))
        self.error = error


class StorageFailed(Exception):
    """The storage could not take a file (exit 5): ``file`` was being stored when ``error``
    happened; what was accepted before it stays accepted."""

    def __init__(self, file: str, error: BaseException, intake: Intake) -> None:
        detail = getattr(error, "strerror", None) or str(error) or type(error).__name__
        super().__init__(detail)
        self.file = file
        self.error = error
        self.intake = intake


def _chunks(handle: BinaryIO) -> Iterator[bytes]:
    while True:
        try:
            chunk = handle.read(_CHUNK)
        except OSError as exc:
            raise _ReadFailed(exc) from exc
        if not chunk:
            return
        yield chunk


def _unreadable(path: Path) -> str | None:
    """Why ``path`` cannot be accepted, or None when it is a regular file."""
    if not path.exists():
        return "no such file"
    if path.is_dir():
        return "is a directory, not a file to add"
    if not path.is_file():
        return "is not a regular file"
    return None


def _is_storage_error(exc: BaseException) -> bool:
    """An error of the object store: the file system under it, or the S3 client."""
    return isinstance(exc, OSError) or type(exc).__module__.split(".")[0] in (
        "botocore",
        "boto3",
        "s3transfer",
    )


@dataclass
class Intake:
    """What happened to the files given to ``records add`` or ``media add``."""

    ids: list[int] = field(default_factory=list)
    """Ids accepted, in the order of the files."""
    names: dict[int, str] = field(default_factory=dict)
    """Each accepted id's file, as shown."""
    refused: int = 0
    """Files refused (not stored)."""
    untried: int = 0
    """Files not taken because intake ended early: a stop signal came first, or the storage
    failed (the file it failed on and those after it)."""
    duplicates: list[tuple[str, int]] = field(default_factory=list)
    """Files skipped because the owner already has their bytes: (shown name, existing id), one
    per file given (a file given twice is two, so the summary's counts add up to the files)."""
    stopped: bool = False
    """A stop signal ended the run early: during intake, or while it waited on what it
    accepted with some of it unfinished (the summary's ``stopped``)."""
    order: list[int] = field(default_factory=list)
    """The id of each file accepted or already there, in the files' order (repeats kept)."""

    @property
    def followed(self) -> list[int]:
        """The ids the run waits on and counts done or halted: each accepted one and each
        already there, once, in the files' order (a rerun of an interrupted command finishes
        what the first run accepted, as the first would have)."""
        there = [held_id for _, held_id in self.duplicates]
        return list(dict.fromkeys([*self.order, *self.ids, *there]))


def accept_files(
    paths: Sequence[Path],
    accept: Accept,
    noun: str,
    *,
    hint: Callable[[Path, RejectedInput], str | None] | None = None,
    stop: threading.Event | None = None,
    as_json: bool = False,
    held_where: Callable[[int], str] | None = None,
) -> Intake:
    """Run ``accept`` on each path; a refusal is reported (with ``hint``) and counted, never fatal.

    Each outcome is said as it happens: a refusal on stderr (``FILE: refused (reason): …``);
    with ``as_json``, ``{"event": "accepted", "file", "id"}``, ``{"event": "duplicate", "file",
    "id"}`` (``accept`` raised :class:`~conveyor.errors.Duplicate`: the owner holds these bytes)
    or ``{"event": "refused", "file", "reason", "message"}`` on stdout, one object per line.

    Args:
        noun: ``record`` or ``item``, for the events.
        stop: set by a stop signal; checked between files.
        held_where: where the record or item that already holds a file's bytes is, when that
            is worth saying (`` in album "K"`` for another album), else empty.

    Returns:
        The accepted ids in order, how many paths were refused and how many not tried.

    Raises:
        StorageFailed: the storage could not take a file (those accepted before stay).
    """
    from conveyor.errors import Duplicate, RejectedInput

    def event(document: dict[str, Any]) -> None:
        try:
            print_json_line(document)
        except BrokenPipeError:  # the reader went away: the stop event ends intake
            stdout_closed()

    intake = Intake()
    # A second Ctrl-C waits for the file in hand, then ends intake as the first one does.
    with holding_interrupts(then_raise=False):
        for index, path in enumerate(paths):
            if (stop is not None and stop.is_set()) or interrupt_pending() or stdout_was_closed():
                intake.stopped = True
                intake.untried = len(paths) - index
                break
            name = shown_name(path)
            problem = _unreadable(path)
            reason = "unreadable"
            try:
                existing = None
                if problem is None:
                    try:
                        with path.open("rb") as handle:
                            kept = kept_name(os.fsencode(path.name), posix_name=True) or name
                            new_id = accept(_chunks(handle), kept)
                    except Duplicate as exc:  # the owner holds these bytes; nothing was kept
                        existing = exc.existing_id
                    else:
                        intake.ids.append(new_id)
                        intake.order.append(new_id)
                        intake.names[new_id] = name
                        if as_json:
                            event({"event": "accepted", "file": name, noun: new_id})
                        continue
                if existing is not None:
                    intake.duplicates.append((name, existing))
                    intake.order.append(existing)
                    if as_json:
                        event({"event": "duplicate", "file": name, noun: existing})
                    where = held_where(existing) if held_where is not None else ""
                    err_console.print(
                        Text(
                            f"{name}: already there as {noun} {existing}{where}; not stored "
                            "again (--keep-duplicates adds it again)"
                        )
                    )
                    continue
            except RejectedInput as exc:
                reason = exc.reason
                problem = f"refused ({exc.reason}): {exc}"
                extra = hint(path, exc) if hint is not None else None
                if extra:
                    problem = f"{problem}; {extra}"
            except _ReadFailed as exc:
                problem = f"cannot be read: {exc}"
            except Exception as exc:
                if not _is_storage_error(exc):
                    raise
                opening_the_source = (
                    isinstance(exc, OSError)
                    and exc.filename is not None
                    and os.fsdecode(exc.filename) == os.fsdecode(path)
                )
                if opening_the_source and problem is None:
                    problem = f"cannot be read: {getattr(exc, 'strerror', None) or exc}"
                if problem is None:
                    # The file in hand was not kept and the rest are not tried: the summary's
                    # counts add up to the files given.
                    intake.untried = len(paths) - index
                    raise StorageFailed(name, exc, intake) from exc
            if problem is not None:
                intake.refused += 1
                if as_json:
                    message = problem.split(": ", 1)[-1]
                    event({"event": "refused", "file": name, "reason": reason, "message": message})
                err_console.print(Text(f"{name}: {problem}", style="red"))
    return intake


def summary(
    noun: str, given: int, intake: Intake, done: int, halted: int, *, deleted: int = 0
) -> str:
    """``3 files: 2 accepted as records (1 done, 1 halted), 1 refused`` — the last line of an
    intake; ``, 4 not tried`` when a stop signal ended it early.

    ``done``, ``halted`` and ``deleted`` (deleted while the command waited) count every record
    of :attr:`Intake.followed`; when some files were already there, they follow the files'
    counts for all of those records at once: ``3 files: 1 accepted as records, 0 refused, 2
    already there (records 1, 2); 3 records: 2 done, 1 halted``.
    """
    followed = len(intake.followed)
    waiting = followed - done - halted - deleted
    parts = [f"{done} done", f"{halted} halted"] + ([f"{waiting} unfinished"] if waiting else [])
    parts += [f"{deleted} deleted meanwhile"] if deleted else []
    files = "file" if given == 1 else "files"
    untried = f", {intake.untried} not tried" if intake.untried else ""
    if not intake.duplicates:
        return (
            f"{given} {files}: {len(intake.ids)} accepted as {noun}s ({', '.join(parts)}), "
            f"{intake.refused} refused{untried}"
        )
    # Copies of one file name its record once: "3 already there (record 4)".
    held = list(dict.fromkeys(held_id for _, held_id in intake.duplicates))
    plural = "" if len(held) == 1 else "s"
    there = f"{len(intake.duplicates)} already there ({noun}{plural} {', '.join(map(str, held))})"
    things = noun if followed == 1 else f"{noun}s"
    return (
        f"{given} {files}: {len(intake.ids)} accepted as {noun}s, {intake.refused} refused, "
        f"{there}{untried}; {followed} {things}: {', '.join(parts)}"
    )


def summary_event(
    noun: str, given: int, intake: Intake, done: int, halted: int, *, deleted: int = 0
) -> dict[str, Any]:
    """The ``{"event": "summary", …}`` object that ends a ``--json`` intake stream. Its
    ``records`` (``items``: the noun's plural) counts :attr:`Intake.followed`, accepted and
    already there, each once: ``done + halted + unfinished + deleted``."""
    followed = len(intake.followed)
    return {
        "event": "summary",
        "files": given,
        "accepted": len(intake.ids),
        "refused": intake.refused,
        "duplicates": len(intake.duplicates),
        "not_tried": intake.untried,
        f"{noun}s": followed,
        "done": done,
        "halted": halted,
        "unfinished": followed - done - halted - deleted,
        "deleted": deleted,
        "stopped": intake.stopped,
    }
