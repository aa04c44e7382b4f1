"""``conveyor ingest FILE…``: accept recordings, run workers until each is done or halted."""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.text import Text

from conveyor.cli.exits import ExitCode
from conveyor.cli.intake import accept_files, summary
from conveyor.cli.output import StageLines, err_console, fail, note, progress_display, setup_logging
from conveyor.cli.settings import make_runtime
from conveyor.cli.signals import stop_on_signals

if TYPE_CHECKING:
    from sqlalchemy import RowMapping

    from conveyor.errors import RejectedInput

__all__ = ["OWNER_HELP", "audio_hint", "ingest", "media_hint"]


#: The --owner help of every command that adds or finds things by owner.
OWNER_HELP = (
    "Owner (a user name). Default `me`: what is added from the shell without --owner belongs "
    "to `me`; the HTTP API uses the token's user instead."
)


def _sniffed_kind(path: Path, exc: RejectedInput) -> str | None:
    from conveyor.objects.sniff import sniff

    return sniff(path).kind if exc.reason == "not_media" else None


def audio_hint(path: Path, exc: RejectedInput) -> str | None:
    """The way forward for a file ``ingest`` refused as not audio: the other command, or PCM
    (only for bytes that look like samples; the intake's message then says so already)."""
    kind = _sniffed_kind(path, exc)
    if kind == "image":
        return f"it is a photo: add it to an album with `conveyor media add ALBUM {path}`"
    return None


def media_hint(path: Path, exc: RejectedInput) -> str | None:
    """The way forward for a file ``media add`` refused as not a photo or video."""
    if _sniffed_kind(path, exc) == "audio":
        return f"it is audio: transcribe it with `conveyor ingest {path}`"
    return None


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
    title: Annotated[str | None, typer.Option(metavar="T", help="Title for the records.")] = None,
    hints: Annotated[
        str | None,
        typer.Option(
            metavar="TEXT",
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
) -> None:
    """Transcribe recordings: accept, run the pipeline until each is done or halted, print."""
    from conveyor.audio import queries
    from conveyor.audio.cards import described_card, provider_waits, transcript_of
    from conveyor.audio.intake import accept_audio, clean_language
    from conveyor.audio.stages import AUDIO
    from conveyor.cli.records import print_card, state_of
    from conveyor.cli.startup import check_recognizer

    setup_logging(logging.WARNING)
    runtime = make_runtime()
    language = clean_language(language)  # EN, " en " and en alike
    if language is not None and language not in runtime.languages:
        raise fail(
            f"--language {language!r} is not a language code the recognizer knows; use an "
            "ISO 639-1 code such as en, de or ru, or leave it out to detect the language",
            ExitCode.USAGE,
        )
    if channels is not None and channels not in ("mix", "separate"):
        raise fail(f"--channels is mix or separate, not {channels!r}", ExitCode.USAGE)
    workers = runtime.settings.pipeline.workers
    if workers > 0:
        check_recognizer(runtime)
    intake = accept_files(
        files,
        lambda path: accept_audio(
            runtime.engine,
            runtime.store,
            runtime.clock,
            path,
            owner=owner,
            title=title,
            language=language,
            hints=hints,
            channels=channels or runtime.settings.transcription.channels,
            raw_pcm=raw_pcm,
            strict=True,
            languages=runtime.languages,
        ),
        audio_hint,
    )
    ids = intake.ids
    if not ids:
        note(summary("record", len(files), intake, 0, 0))
        raise typer.Exit(ExitCode.HALTED)
    if workers == 0:
        note(
            f"accepted records {', '.join(map(str, ids))}; [pipeline] workers = 0, so they wait "
            "for a `conveyor worker`"
        )
        note(summary("record", len(files), intake, 0, 0))
        raise typer.Exit(ExitCode.HALTED if intake.refused else ExitCode.OK)
    stop = stop_on_signals()
    deleted: set[int] = set()
    pool = runtime.pool({"audio": workers})
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
            lines = StageLines("record")  # the bar's stand-in when stderr is not a terminal
            while pending and not stop.is_set():
                with runtime.engine.connect() as conn:
                    rows = {}
                    for rid in list(pending):
                        row = queries.record_by_id(conn, rid)
                        if row is None:  # `records delete` (or the API) removed it meanwhile
                            pending.discard(rid)
                            deleted.add(rid)
                            progress.update(tasks[rid], stage="deleted")
                            progress.console.print(
                                Text(f"record {rid} was deleted meanwhile; not waiting for it")
                            )
                            continue
                        rows[rid] = row
                        halted = row["halted_at"] is not None
                        label = f"halted: {row['halt_reason']}" if halted else row["stage"]
                        progress.update(
                            tasks[rid], completed=AUDIO.stage_names.index(row["stage"]), stage=label
                        )
                        lines.show(rid, label)
                        if halted or row["stage"] == "done":
                            pending.discard(rid)
                    waits = provider_waits(conn, [rows[rid] for rid in pending])
                for rid, wait in waits.items():
                    reason = (str(rows[rid]["stage"]), str(wait["error"]))
                    if said.get(rid) == reason:
                        continue
                    said[rid] = reason
                    progress.console.print(
                        Text(_waiting_line(rid, wait, rows[rid], runtime.clock.now()))
                    )
                time.sleep(0.2)
    finally:
        pool.stop()
    done = halted_count = 0
    with runtime.engine.connect() as conn:
        for rid in ids:
            row = queries.record_by_id(conn, rid)
            if row is None:
                if rid not in deleted:
                    deleted.add(rid)
                    note(f"record {rid} was deleted meanwhile")
                continue
            text = transcript_of(conn, rid)
            card = described_card(conn, row)
            print_card(card, text["body"] if text else None, state_of(row, runtime.clock.now()))
            done += bool(card["done"])
            halted_count += bool(card["halted"])
    note(summary("record", len(files), intake, done, halted_count, deleted=len(deleted)))
    if stop.is_set():
        err_console.print("stopped before every record finished; `conveyor worker` continues them")
        raise typer.Exit(ExitCode.INTERRUPTED)
    finished = done == len(ids) and not intake.refused
    raise typer.Exit(ExitCode.OK if finished else ExitCode.HALTED)
