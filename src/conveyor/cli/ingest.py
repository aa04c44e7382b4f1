"""``conveyor records add FILE…``: accept recordings, run workers until each is done or halted."""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, NoReturn

import typer

from conveyor.cli.exits import ExitCode
from conveyor.cli.intake import shown_name
from conveyor.cli.intake_output import IntakeOutput, row_state
from conveyor.cli.output import JsonOption, fail, progress_display, setup_logging
from conveyor.cli.settings import make_runtime
from conveyor.cli.signals import stop_on_signals
from conveyor.cli.texts import TextParser
from conveyor.limits import HINTS, RECORD_TITLE

if TYPE_CHECKING:
    from sqlalchemy import RowMapping

    from conveyor.cli.intake import Intake
    from conveyor.errors import RejectedInput
    from conveyor.runtime import Runtime

__all__ = ["OWNER_HELP", "KeepDuplicates", "audio_hint", "check_owner", "ingest", "media_hint"]


#: The --owner help of every command that adds or finds things by owner.
OWNER_HELP = (
    "Owner (a user name). Default `me`: what is added from the shell without --owner belongs "
    "to `me`; the HTTP API uses the token's user instead."
)


def check_owner(owner: str) -> None:
    """Refuse an ``--owner`` no user could have (empty, a space, over 100 characters) with
    exit code 2 before anything is made for it: what it owned no token or sign-in could reach.

    Raises:
        typer.Exit: :attr:`ExitCode.USAGE`.
    """
    from conveyor.accounts import clean_user_name
    from conveyor.errors import RejectedInput

    if not owner.strip():
        raise fail(
            "--owner names no user; give a user name, or leave it out for `me`", ExitCode.USAGE
        )
    try:
        clean_user_name(owner)
    except RejectedInput as exc:
        raise fail(f"--owner {owner!r}: {exc}", ExitCode.USAGE) from None


def _sniffed_kind(path: Path, exc: RejectedInput) -> str | None:
    from conveyor.objects.sniff import sniff

    return sniff(path).kind if exc.reason == "not_media" else None


def _argument(path: Path) -> str:
    """``path`` as the shell takes it back in a command to run: quoted when it has a space or
    a quote (``'my photo.jpg'``), and ``./`` before a name that would read as an option; a
    name with an escape in it (``caf\\xe9.wav``, ``a\\\\b.wav``) as bash's ``$'…'``, which
    reads the kept form's escapes back into the bytes."""
    import shlex

    shown = shown_name(path)
    shown = f"./{shown}" if shown.startswith("-") else shown
    if "\\" in shown:
        return "$'" + shown.replace("'", "\\'") + "'"
    return shlex.quote(shown)


def audio_hint(path: Path, exc: RejectedInput) -> str | None:
    """The way forward for a file ``ingest`` refused as not audio: the other command, or PCM
    (only for bytes that look like samples; the intake's message then says so already)."""
    kind = _sniffed_kind(path, exc)
    if kind == "image":
        return (
            f"it is a photo: add it to an album with `conveyor media add ALBUM {_argument(path)}`"
        )
    return None


def media_hint(path: Path, exc: RejectedInput) -> str | None:
    """The way forward for a file ``media add`` refused as not a photo or video."""
    if _sniffed_kind(path, exc) == "audio":
        return f"it is audio: transcribe it with `conveyor records add {_argument(path)}`"
    return None


#: The --keep-duplicates option of `records add` and `media add`.
KeepDuplicates = Annotated[
    bool,
    typer.Option(
        "--keep-duplicates",
        help="Add a file even when the owner already has one with the same bytes (by default "
        "it is skipped and the existing id said, so a rerun makes no second copies).",
    ),
]


def _waiting_line(record_id: int, wait: Mapping[str, Any], row: RowMapping, now: float) -> str:
    """``record 3: openai is unreachable (…); retrying in 8 s``: why a record waits (D6)."""
    said = wait["error"] or f"{wait['provider']} gave no reason"
    retry_at = row["retry_at"]
    when = "retrying now"
    if retry_at is not None and float(retry_at) > now:
        when = f"retrying in {max(1, round(float(retry_at) - now))} s"
    return f"record {record_id}: {said}; {when}"


def ingest(
    files: Annotated[list[Path], typer.Argument(metavar="FILES", help="Recordings to transcribe.")],
    owner: Annotated[str, typer.Option(metavar="NAME", help=OWNER_HELP)] = "me",
    language: Annotated[
        str | None,
        typer.Option(
            metavar="xx", help="Language of the speech (ISO 639-1, e.g. en); default: detect."
        ),
    ] = None,
    raw_pcm: Annotated[
        bool,
        typer.Option(
            "--raw-pcm", help="The files are headerless 16 kHz mono 16-bit little-endian PCM."
        ),
    ] = False,
    title: Annotated[
        str | None,
        typer.Option(
            metavar="T",
            help=f"Title for the records ({RECORD_TITLE.rule}).",
            parser=TextParser(RECORD_TITLE),
        ),
    ] = None,
    hints: Annotated[
        str | None,
        typer.Option(
            metavar="TEXT",
            parser=TextParser(HINTS),
            help="Names and terms the speech contains, to spell them right (added to the "
            "owner's vocabulary, see `conveyor vocabulary set`).",
        ),
    ] = None,
    channels: Annotated[
        str | None,
        typer.Option(
            metavar="MODE",
            help="mix or separate. separate: recognise each channel (and audio track) on its "
            "own, segments labelled [1], [2], ...; mix: hear them as one. Default: "
            "[transcription] channels.",
        ),
    ] = None,
    keep_duplicates: KeepDuplicates = False,
    as_json: JsonOption = False,
) -> None:
    """Transcribe recordings: accept, run the pipeline until each is done or halted, print.

    A file already there (the owner's record with the same bytes, unless --keep-duplicates) is
    waited for and printed as one accepted, so a rerun of an interrupted command finishes it.
    """
    from conveyor.audio import queries
    from conveyor.audio.cards import described_card, provider_waits, transcript_of
    from conveyor.audio.intake import accept_audio, clean_hints, clean_language
    from conveyor.audio.stages import AUDIO
    from conveyor.cli.startup import check_recognizer
    from conveyor.errors import RejectedInput

    setup_logging(logging.WARNING)
    # Usage mistakes exit 2 before anything is stored, as --language does.
    check_owner(owner)
    try:
        clean_hints(hints)
    except RejectedInput as exc:
        raise fail(f"--hints: {exc}", ExitCode.USAGE) from None
    if channels is not None and channels not in ("mix", "separate"):
        raise fail(f"--channels is mix or separate, not {channels!r}", ExitCode.USAGE)
    runtime = make_runtime()
    language = clean_language(language)  # EN, " en " and en alike
    if language is not None and language not in runtime.languages:
        raise fail(
            f"--language {language!r} is not a language code the recognizer knows; use an "
            "ISO 639-1 code such as en, de or ru, or leave it out to detect the language",
            ExitCode.USAGE,
        )
    workers = runtime.settings.pipeline.workers
    if workers > 0:
        check_recognizer(runtime)
    out = IntakeOutput("record", len(files), as_json)
    stop = stop_on_signals(closed_stdout=True)
    intake = out.take(
        runtime,
        lambda chunks, name: accept_audio(
            runtime.engine,
            runtime.store,
            runtime.clock,
            chunks,
            owner=owner,
            original_name=name,
            title=title,
            language=language,
            hints=hints,
            channels=channels or runtime.settings.transcription.channels,
            raw_pcm=raw_pcm,
            strict=True,
            languages=runtime.languages,
            keep_duplicate=keep_duplicates,
        ),
        files,
        hint=audio_hint,
        stop=stop,
    )
    # What the files are: records accepted now, and those already there (perhaps accepted by
    # an interrupted run of this command, not done yet), each waited for the same way.
    ids = intake.followed

    def cards() -> list[dict[str, Any]]:
        """The records' cards as they stand (with their transcripts), for ``result`` events."""
        found = []
        with runtime.engine.connect() as conn:
            for rid in ids:
                row = queries.record_by_id(conn, rid)
                if row is not None:
                    text = transcript_of(conn, rid)
                    card = described_card(conn, row, now=runtime.clock.now())
                    found.append({**card, "transcript": text["body"] if text else None})
        return found

    if intake.stopped or not ids or workers == 0:
        out.end_early(intake, "[pipeline] workers" if workers == 0 else None, cards=cards)
    deleted: set[int] = set()
    if _finished(runtime, ids, out):  # all already there and done or halted: said at once
        _print_results(runtime, ids, out, intake, deleted, stopped=False)
    pool = runtime.pool({"audio": workers})
    # Registered as `conveyor worker` is: seen by `conveyor workers`, obeys pauses and drains.
    registry = runtime.registry(pool)
    registry.start()
    if "audio" in registry.paused:
        registry.stop()
        out.end_early(intake, None, paused_lane="audio", cards=cards)
    from conveyor.cli.drain import StopOrDrain

    stop_waiting = StopOrDrain(stop, registry)
    pool.start()
    runtime.notifier.wake_local()
    try:
        with progress_display("stage") as progress:
            tasks = {
                rid: progress.add_task(
                    f"record {rid}", total=len(AUDIO.stage_names) - 1, stage="uploaded"
                )
                for rid in ids
            }
            pending = set(ids)
            # What each record was last said to wait on (stage, provider's words): a line is
            # printed when that changes, not on every try of a provider that stays down.
            said: dict[int, tuple[str, str]] = {}
            while pending and not stop_waiting.is_set():
                with runtime.engine.connect() as conn:
                    rows = {}
                    for rid in list(pending):
                        row = queries.record_by_id(conn, rid)
                        if row is None:  # `records delete` (or the API) removed it meanwhile
                            pending.discard(rid)
                            deleted.add(rid)
                            progress.update(tasks[rid], stage="deleted")
                            out.deleted(rid, progress.console)
                            continue
                        rows[rid] = row
                        label = row_state(row)
                        progress.update(
                            tasks[rid], completed=AUDIO.stage_names.index(row["stage"]), stage=label
                        )
                        out.state(rid, label)
                        if _record_finished(row):
                            pending.discard(rid)
                    waits = provider_waits(conn, [rows[rid] for rid in pending])
                for rid, wait in waits.items():
                    reason = (str(rows[rid]["stage"]), str(wait["error"]))
                    if said.get(rid) == reason:
                        continue
                    said[rid] = reason
                    line = _waiting_line(rid, wait, rows[rid], runtime.clock.now())
                    out.waiting(rid, line, progress.console)
                time.sleep(0.2)
    finally:
        pool.stop()
        registry.stop()
    _print_results(runtime, ids, out, intake, deleted, stopped=stop_waiting.is_set())


def _finished(runtime: Runtime, ids: list[int], out: IntakeOutput) -> bool:
    """Whether every record of ``ids`` is done, halted or gone: nothing for workers to do;
    then each one's state is said, as a run that waited says it."""
    from conveyor.audio import queries

    with runtime.engine.connect() as conn:
        rows = {rid: queries.record_by_id(conn, rid) for rid in ids}
    return out.said_if_finished(rows, _record_finished)


def _record_finished(row: Any) -> bool:
    """Whether a record (its row) needs no more work: done or halted."""
    return row["halted_at"] is not None or row["stage"] == "done"


def _print_results(
    runtime: Runtime,
    ids: list[int],
    out: IntakeOutput,
    intake: Intake,
    deleted: set[int],
    *,
    stopped: bool,
) -> NoReturn:
    """Each record's card and transcript (``result`` events with ``--json``), the summary, and
    the exit code; ``deleted``: the ids already said deleted meanwhile."""
    from conveyor.audio import queries
    from conveyor.audio.cards import described_card, transcript_of
    from conveyor.cli.records import print_card, state_of

    done = halted_count = 0
    with runtime.engine.connect() as conn:
        for rid in ids:
            row = queries.record_by_id(conn, rid)
            if row is None:
                if rid not in deleted:
                    deleted.add(rid)
                    out.deleted(rid)
                continue
            text = transcript_of(conn, rid)
            card = described_card(conn, row, now=runtime.clock.now())
            body = text["body"] if text else None
            if out.as_json:
                out.result({**card, "transcript": body})
            else:
                print_card(card, body, state_of(row, runtime.audio, runtime.clock.now()))
            done += bool(card["done"])
            halted_count += bool(card["halted"])
    out.finish(intake, done, halted_count, len(deleted), stopped=stopped)
