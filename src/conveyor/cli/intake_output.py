"""What ``records add`` and ``media add`` say while they work: for a person, lines on stderr
and cards on stdout; with ``--json``, one JSON object per line on stdout (schema in
docs/cli.md), the lines for people still on stderr.

Events, each ``{"event": KIND, …}`` with ``record`` (or ``item``) the id:

* ``accepted`` (``file``, id), ``refused`` (``file``, ``reason``, ``message``), ``duplicate``
  (``file``, the id the owner already has), as intake goes;
* ``state`` (id, ``state``: a stage of the domain, or ``halted: REASON``; every value is one
  of :func:`event_states`) at each change;
* ``waiting`` (id, ``message``): the provider refused for now (D6), once per reason;
* ``deleted`` (id): deleted by someone else while the command waited;
* ``result`` (id, ``card``): the card (as ``records show --json``) or item of each record
  accepted or already there, at the end, as it stands then (also when the run processes
  nothing);
* ``summary`` last: ``files``, ``accepted``, ``refused``, ``duplicates``, ``not_tried``,
  ``records`` (``items``), ``done``, ``halted``, ``unfinished``, ``deleted``, ``stopped``.

Records (items) already there are waited for and counted as accepted ones are. A closed stdout
(its reader went away) stops the run as a stop signal does, and it exits 141
(:attr:`ExitCode.PIPE_CLOSED`), its summary on stderr.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

import typer
from rich.console import Console
from rich.text import Text

from conveyor.cli.exits import ExitCode
from conveyor.cli.intake import (
    Accept,
    Intake,
    StorageFailed,
    accept_files,
    summary,
    summary_event,
)
from conveyor.cli.output import StageLines, err_console, fail, note, print_json_line, voice
from conveyor.cli.signals import stdout_closed, stdout_was_closed

if TYPE_CHECKING:
    from conveyor.errors import RejectedInput
    from conveyor.pipeline import Declaration
    from conveyor.runtime import Runtime

__all__ = ["IntakeOutput", "event_state", "event_states", "row_state"]


def _declaration(noun: str) -> Declaration:
    """The domain whose add command speaks of ``noun``: ``record`` (audio), ``item`` (media)."""
    from conveyor.audio.stages import AUDIO
    from conveyor.media.stages import MEDIA

    (declaration,) = (d for d in (AUDIO, MEDIA) if d.noun == noun)
    return declaration


def event_state(stage: str, halt_reason: str | None) -> str:
    """The ``state`` of a ``state`` event: the stage's name, or ``halted: REASON`` when the
    record or item is halted (``halt_reason`` not None)."""
    return stage if halt_reason is None else f"halted: {halt_reason}"


def row_state(row: Mapping[Any, Any]) -> str:
    """:func:`event_state` of a record's or item's row (its ``stage``, ``halted_at`` and
    ``halt_reason``)."""
    halted = row["halted_at"] is not None
    return event_state(row["stage"], row["halt_reason"] if halted else None)


def event_states(noun: str) -> frozenset[str]:
    """Every ``state`` value the add command of ``noun`` (``record``: ``records add``,
    ``item``: ``media add``) may emit: each stage of its domain's declaration (D11, the one
    list of stages; docs/cli.md lists the same), and ``halted: REASON`` for each halt reason
    the domain declares, the engine's included.

    Raises:
        ValueError: no domain speaks of ``noun``.
    """
    declaration = _declaration(noun)
    halts = (event_state("", str(r)) for enum in declaration.halt_reasons for r in enum)
    return frozenset((*declaration.stage_names, *halts))


class IntakeOutput:
    """The voice of one ``records add`` (``noun="record"``) or ``media add`` (``"item"``) run."""

    def __init__(self, noun: str, given: int, as_json: bool) -> None:
        self._noun = noun
        self._given = given
        self._json = as_json
        self._lines = StageLines(noun)  # the progress bar's stand-in when stderr is no terminal
        self._states: dict[int, str] = {}

    @property
    def as_json(self) -> bool:
        """``--json``: the run is said as JSON Lines on stdout, its cards as ``result`` events."""
        return self._json

    def _event(self, kind: str, thing_id: int | None = None, **fields: Any) -> None:
        if self._json:
            head: dict[str, Any] = {"event": kind}
            if thing_id is not None:
                head[self._noun] = thing_id
            try:
                print_json_line({**head, **fields})
            except BrokenPipeError:  # the reader went away: stop as on Ctrl-C, exit 141
                stdout_closed()

    @staticmethod
    def _exit(code: ExitCode) -> NoReturn:
        """End with ``code``, or 141 when stdout's reader went away meanwhile: a script then
        read only part of what the run said, whatever became of the records."""
        raise typer.Exit(ExitCode.PIPE_CLOSED if stdout_was_closed() else code)

    def take(
        self,
        runtime: Runtime,
        accept: Accept,
        files: Sequence[Path],
        *,
        hint: Callable[[Path, RejectedInput], str | None],
        stop: threading.Event,
        held_where: Callable[[int], str] | None = None,
    ) -> Intake:
        """Accept ``files`` (see :func:`~conveyor.cli.intake.accept_files`).

        Raises:
            typer.Exit: :attr:`ExitCode.UNAVAILABLE` when the storage fails, after saying what
                was accepted before.
        """
        try:
            return accept_files(
                files,
                accept,
                self._noun,
                hint=hint,
                stop=stop,
                as_json=self._json,
                held_where=held_where,
            )
        except StorageFailed as exc:
            self._accepted_so_far(exc.intake, "`conveyor worker` processes them")
            self._summary(exc.intake, 0, 0, 0)
            # Imported here: the object store package loads SQLAlchemy, which help must not.
            from conveyor.objects.store import full_storage

            full = full_storage(exc.error)
            if full is not None:
                then = "free space there" if full.no_room else "store it elsewhere"
                raise fail(
                    f"cannot store {exc.file}: {full}; {then}, then run the command again",
                    ExitCode.UNAVAILABLE,
                ) from None
            raise fail(
                f"cannot store {exc.file}: the storage {runtime.store.describe_location()} "
                f"failed: {exc}; free space there (or fix the bucket's access), then run the "
                "command again",
                ExitCode.UNAVAILABLE,
            ) from None

    def _accepted_so_far(self, intake: Intake, then: str) -> None:
        if intake.ids:
            ids = ", ".join(map(str, intake.ids))
            err_console.print(Text(f"accepted {self._noun}s {ids}; {then}"))

    def _summary(self, intake: Intake, done: int, halted: int, deleted: int) -> None:
        if self._json:
            document = summary_event(self._noun, self._given, intake, done, halted, deleted=deleted)
            try:
                print_json_line(document)
            except BrokenPipeError:
                stdout_closed()
        note(summary(self._noun, self._given, intake, done, halted, deleted=deleted))

    def end_early(
        self,
        intake: Intake,
        idle_setting: str | None,
        *,
        paused_lane: str | None = None,
        cards: Callable[[], Sequence[dict[str, Any]]] | None = None,
    ) -> NoReturn:
        """End a run that will not process what it accepted: stopped during intake, nothing
        accepted, no workers in this process (``idle_setting`` names the setting at 0), or
        their lane paused cluster-wide (``paused_lane``, by `conveyor lanes pause`).

        ``cards`` gives the cards of the things accepted or already there as they stand: with
        ``--json`` each is a ``result`` event before the summary, as a run that waited ends
        (unfinished ones too); the summary counts those done or halted (one already there
        may be either), and a halted one is exit code 1."""
        found = list(cards()) if cards is not None and intake.followed else []
        for card in found:
            self.result(card)
        done = sum(bool(card["done"]) for card in found)
        halted = sum(bool(card["halted"]) for card in found)
        deleted = len(intake.followed) - len(found) if cards is not None else 0
        if intake.stopped or stdout_was_closed():
            self._accepted_so_far(intake, "`conveyor worker` processes them")
            self._summary(intake, done, halted, deleted)
            self._exit(ExitCode.INTERRUPTED)
        if intake.ids and (idle_setting is not None or paused_lane is not None):
            ids = ", ".join(map(str, intake.ids))
            if paused_lane is not None:
                note(
                    f"accepted {self._noun}s {ids}; the {paused_lane} lane is paused, so they "
                    f"wait for `conveyor lanes resume {paused_lane}`"
                )
            else:
                note(
                    f"accepted {self._noun}s {ids}; {idle_setting} = 0, so they wait for a "
                    "`conveyor worker`"
                )
        self._summary(intake, done, halted, deleted)
        failed = intake.refused or not intake.followed or halted or deleted
        self._exit(ExitCode.HALTED if failed else ExitCode.OK)

    def state(self, thing_id: int, state: str, shown: str | None = None) -> None:
        """A thing's state (:func:`event_state`: a stage, or ``halted: REASON``), said when it
        changes; ``shown`` is the line people read for it when it says more than the stage
        (``variants ready; transcoding playback``), never a ``--json`` value."""
        if self._states.get(thing_id) == state:
            return
        self._states[thing_id] = state
        self._lines.show(thing_id, shown or state)
        self._event("state", thing_id, state=state)

    def said_if_finished(
        self,
        rows: Mapping[int, Mapping[Any, Any] | None],
        finished: Callable[[Mapping[Any, Any]], bool],
        shown: Callable[[Mapping[Any, Any]], str] | None = None,
    ) -> bool:
        """Whether every thing of ``rows`` (id → its row, None when gone) is ``finished``:
        nothing for this command's workers to do (a rerun that found everything already
        there); then each one's state is said (:meth:`state`, with ``shown`` the line people
        read), as a run that waited says it."""
        if not all(row is None or finished(row) for row in rows.values()):
            return False
        for thing_id, row in rows.items():
            if row is not None:
                self.state(thing_id, row_state(row), shown(row) if shown is not None else None)
        return True

    def waiting(self, thing_id: int, line: str, console: Console) -> None:
        """Why a thing waits on its provider (printed above the progress display; a note,
        so not under ``-q``)."""
        if not voice.quiet:
            console.print(Text(line))
        self._event("waiting", thing_id, message=line)

    def deleted(self, thing_id: int, console: Console | None = None) -> None:
        """A thing deleted by someone else while the command waited on it."""
        if console is not None:
            console.print(
                Text(f"{self._noun} {thing_id} was deleted meanwhile; not waiting for it")
            )
        else:
            note(f"{self._noun} {thing_id} was deleted meanwhile")
        self._event("deleted", thing_id)

    def result(self, card: dict[str, Any]) -> None:
        """A finished thing's card (``--json`` only; people get the printed card)."""
        self._event("result", int(card["id"]), card=card)

    def finish(
        self,
        intake: Intake,
        done: int,
        halted: int,
        deleted: int,
        *,
        stopped: bool,
        unfinished_ok: bool = False,
    ) -> NoReturn:
        """The summary and the exit code of a run that processed what it accepted and what was
        already there (``done``, ``halted`` and ``deleted`` count :attr:`Intake.followed`).

        ``unfinished_ok``: what is left unfinished waits for another process by design
        (videos' playback with ``[media] long_workers = 0``), not a failure. A stop signal
        that came once every accepted thing had finished stopped nothing: the run ends as one
        without it (it said "stopped before every record finished" and exit code 130 with
        every record done)."""
        unfinished = len(intake.followed) - done - halted - deleted
        stopped = stopped and unfinished > 0
        intake.stopped = intake.stopped or stopped
        if stopped:
            # Said as a stop during intake says it (docs/cli.md: "the ids accepted so far").
            self._accepted_so_far(intake, "`conveyor worker` processes them")
        self._summary(intake, done, halted, deleted)
        if stopped:
            err_console.print(
                f"stopped before every {self._noun} finished; `conveyor worker` continues them"
            )
            self._exit(ExitCode.INTERRUPTED)
        if unfinished_ok:
            failed = bool(halted or deleted or intake.refused)
        else:
            failed = done != len(intake.followed) or bool(intake.refused)
        self._exit(ExitCode.HALTED if failed else ExitCode.OK)
