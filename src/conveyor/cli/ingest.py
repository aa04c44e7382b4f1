"""``conveyor ingest FILE…``: accept recordings, run workers until each is done or halted."""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import Annotated

import typer

from conveyor.audio import queries
from conveyor.audio.cards import record_card, transcript_of
from conveyor.audio.intake import accept_audio
from conveyor.cli.common import (
    accept_files,
    console,
    err_console,
    fail,
    make_runtime,
    progress_display,
    setup_logging,
    stop_on_signals,
)
from conveyor.cli.records import print_card
from conveyor.errors import ConfigError

_STAGES = ["uploaded", "normalized", "submitted", "transcribed", "done"]


def ingest(
    files: Annotated[list[Path], typer.Argument(help="Recordings to transcribe.")],
    owner: Annotated[str, typer.Option(help="Owner of the records.")] = "me",
    language: Annotated[
        str | None,
        typer.Option(help="Language of the speech (ISO 639-1, e.g. en); default: detect."),
    ] = None,
    raw_pcm: Annotated[
        bool, typer.Option("--raw-pcm", help="Files are headerless 16 kHz mono s16le PCM.")
    ] = False,
    title: Annotated[str | None, typer.Option(help="Title for the records.")] = None,
) -> None:
    """Transcribe recordings: accept, run the pipeline until each is done or halted, print."""
    setup_logging(logging.WARNING)
    runtime = make_runtime()
    if language is not None and language not in runtime.languages:
        raise fail(
            f"--language {language!r} is not a language code the recognizer knows; use an "
            "ISO 639-1 code such as en, de or ru, or leave it out to detect the language",
            2,
        )
    if runtime.settings.pipeline.workers > 0:
        try:
            runtime.provider  # noqa: B018 - a bad model or language fails before any record
        except ConfigError as exc:
            raise fail(f"invalid configuration: {exc}", 2) from None
    ids, refused = accept_files(
        files,
        lambda path: accept_audio(
            runtime.engine,
            runtime.store,
            runtime.clock,
            path,
            owner=owner,
            title=title,
            language=language,
            raw_pcm=raw_pcm,
            languages=runtime.languages,
        ),
    )
    if not ids:
        raise typer.Exit(1)
    workers = runtime.settings.pipeline.workers
    if workers == 0:
        console.print(
            f"accepted records {', '.join(map(str, ids))}; [pipeline] workers = 0, so they wait "
            "for a `conveyor worker`"
        )
        raise typer.Exit(0)
    stop = stop_on_signals()
    pool = runtime.pool({"audio": workers})
    pool.start()
    runtime.notifier.wake_local()
    try:
        with progress_display("stage") as progress:
            tasks = {
                rid: progress.add_task(f"record {rid}", total=len(_STAGES) - 1, stage="uploaded")
                for rid in ids
            }
            pending = set(ids)
            while pending and not stop.is_set():
                with runtime.engine.connect() as conn:
                    for rid in list(pending):
                        row = queries.record_by_id(conn, rid)
                        assert row is not None
                        halted = row["halted_at"] is not None
                        label = f"halted: {row['halt_reason']}" if halted else row["stage"]
                        progress.update(
                            tasks[rid], completed=_STAGES.index(row["stage"]), stage=label
                        )
                        if halted or row["stage"] == "done":
                            pending.discard(rid)
                time.sleep(0.2)
    finally:
        pool.stop()
    halted_any = refused > 0
    with runtime.engine.connect() as conn:
        for rid in ids:
            row = queries.record_by_id(conn, rid)
            assert row is not None
            text = transcript_of(conn, rid)
            card = record_card(row)
            print_card(card, text["body"] if text else None)
            halted_any = halted_any or bool(card["halted"]) or card["stage"] != "done"
    if stop.is_set():
        err_console.print("stopped before every record finished; `conveyor worker` continues them")
    raise typer.Exit(1 if halted_any else 0)
