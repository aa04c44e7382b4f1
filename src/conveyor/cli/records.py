"""``conveyor records``: list, search, show, events, resume, delete, stats: the operator's
tools (P9, P11, D3)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.text import Text

from conveyor.cli.exits import ExitCode
from conveyor.cli.groups import CommandGroup
from conveyor.cli.ids import IdParser
from conveyor.cli.ingest import ingest
from conveyor.cli.output import (
    JsonOption,
    console,
    fail,
    note,
    print_json,
    print_json_line,
    table,
)
from conveyor.cli.settings import make_runtime

if TYPE_CHECKING:
    from sqlalchemy import RowMapping

    from conveyor.pipeline import Domain
    from conveyor.runtime import Runtime

__all__ = ["app", "print_card", "state_of"]

app = CommandGroup(
    help="Audio records: add, list, show, search, events, resume halted ones, delete, stats."
)
app.command("add")(ingest)

RecordId = Annotated[
    int,
    typer.Argument(
        metavar="RECORD_ID",
        help="The record's id (from `conveyor records list`).",
        parser=IdParser("RECORD"),
    ),
]


def state_of(row: RowMapping, domain: Domain, now: float) -> str:
    """Where a record or item is, for a person: done, halted, being worked on, or waiting
    (its :func:`~conveyor.pipeline.status.status_of` in words)."""
    from conveyor.pipeline.status import RecordState, status_of

    status = status_of(row, domain, now)
    stage = status.stage
    match status.state:
        case RecordState.HALTED:
            return f"halted at stage {stage} ({row['halt_reason']})"
        case RecordState.DONE:
            return stage
        case RecordState.WORKING:
            return f"at stage {stage}, a worker is on it"
        case RecordState.RETRYING if status.postponed:
            # Postponed (D6): a provider busy, unreachable or still working is not a failure.
            return f"at stage {stage}, waiting for its next try"
        case RecordState.RETRYING:
            return f"at stage {stage}, waiting to retry after {status.attempts} failed attempt(s)"
    return f"at stage {stage}, waiting for a worker (`conveyor worker` or `conveyor serve`)"


def print_card(card: dict[str, Any], transcript: str | None, status: str | None = None) -> None:
    """Print a record card, its way forward when halted, and its transcript for a person.

    ``status`` is :func:`state_of` the record, printed as the ``next`` line of a record that
    is neither done nor halted (who moves it on: a worker, a retry).
    """
    from conveyor.audio.stages import AUDIO
    from conveyor.halts import way_forward
    from conveyor.names import readable  # a newline in a title would split its line in two

    console.print(
        Text.assemble((f"record {card['id']}", "bold"), f"  {card['original_name'] or ''}")
    )
    console.print(f"  owner      {card['owner']}")
    if card["title"]:
        console.print(f"  title      {readable(card['title'])}")
    if card["halted"]:
        console.print(
            Text.assemble(
                "  state      ",
                ("halted", "red"),
                f" at stage {card['stage']}: {card['halt_reason']}",
            )
        )
        console.print(f"  reason     {card['halt_error']}")
        console.print(f"  halted at  {card['halted_at']}")
        console.print(f"  next       {way_forward(card['halt_reason'], AUDIO.halt_reasons)}")
    else:
        console.print(
            Text.assemble("  state      ", ("done", "green") if card["done"] else card["stage"])
        )
        if status is not None and not card["done"]:
            console.print(Text(f"  next       {status}"))
    console.print(f"  attempts   {card['attempts']}")
    wait = card.get("provider_wait")
    if wait:
        # D6: a refusal is not a failure (attempts stays 0), so the card says why it waits.
        said = wait["error"] or f"{wait['provider']} gave no reason"
        console.print(Text(f"  waiting    {said}"))
        console.print(f"  tries      {wait['tries']} since it entered {card['stage']}")
        console.print(f"  next try   {wait['next_try_at'] or 'when a worker takes it'}")
    if card["duration"] is not None:
        console.print(f"  duration   {card['duration']:.2f} s")
    if card["detected_language"]:
        console.print(f"  language   {card['detected_language']}")
    if card["channels"]:  # how the speech is heard: docs/cli.md's --channels points here
        console.print(f"  channels   {card['channels']}")
    if card.get("hints"):  # the record's own, as its web page shows them
        console.print(f"  hints      {card['hints']}")
    console.print(f"  created    {card['created_at']}")
    if transcript is not None:
        if card["no_speech"]:
            console.print("  transcript (no speech detected)")
        else:
            console.print("  transcript", style="bold")
            # Every line indented under its heading: channels heard apart give one per segment
            # ("[1] ..."), which are text, not Rich markup.
            for line in transcript.splitlines() or [""]:
                console.print(f"    {line}", markup=False, highlight=False)


@app.command("list")
def list_(
    owner: Annotated[
        str | None, typer.Option(metavar="NAME", help="Only this owner's records.")
    ] = None,
    stage: Annotated[
        str | None,
        typer.Option(
            metavar="STAGE", help="Only records at this stage (uploaded, normalized, …, done)."
        ),
    ] = None,
    halted: Annotated[bool, typer.Option("--halted", help="Only halted records.")] = False,
    limit: Annotated[
        int, typer.Option(metavar="N", min=1, max=1000, help="At most this many records (1-1000).")
    ] = 50,
    as_json: JsonOption = False,
) -> None:
    """List records, newest first."""
    from conveyor.audio import queries
    from conveyor.clock import iso_utc

    runtime = make_runtime()
    if stage is not None:
        from conveyor.audio.stages import AUDIO  # the declaration: no steps, no PyAV

        stages = [s.name for s in AUDIO.stages]
        if stage not in stages:
            raise fail(
                f"unknown stage {stage!r}; the stages are {', '.join(stages)}", ExitCode.USAGE
            )
    with runtime.engine.connect() as conn:
        rows = queries.list_records(
            conn, owner=owner, stage=stage, halted=True if halted else None, limit=limit
        )
    if as_json:
        print_json(
            [
                {
                    "id": row["id"],
                    "owner": row["owner"],
                    "name": row["original_name"],
                    "stage": row["stage"],
                    "halt_reason": row["halt_reason"],
                    "created_at": iso_utc(row["created_at"]),
                }
                for row in rows
            ]
        )
    if not rows:
        filtered = owner is not None or stage is not None or halted
        note(
            "no records match"
            if filtered
            else "no records yet; transcribe a recording with `conveyor records add FILE`"
        )
        return
    if as_json:
        return
    out = table("id", "owner", "name", "stage", "halted", "created")
    for row in rows:
        out.add_row(
            str(row["id"]),
            row["owner"],
            row["original_name"],
            row["stage"],
            row["halt_reason"],
            iso_utc(row["created_at"]),
        )
    console.print(out)


@app.command()
def search(
    query: Annotated[str, typer.Argument(metavar="QUERY", help="Words, a name, a phrase.")],
    owner: Annotated[
        str, typer.Option(metavar="NAME", help="Whose recordings to search (default: me).")
    ] = "me",
    limit: Annotated[
        int, typer.Option(metavar="N", min=1, max=200, help="At most this many (1-200).")
    ] = 20,
    as_json: JsonOption = False,
) -> None:
    """Search an owner's titles, briefs, transcripts and corrections, best match first."""
    from conveyor.audio.search import search_records
    from conveyor.errors import RejectedInput

    runtime = make_runtime()
    try:
        hits = search_records(runtime.engine, owner, query, limit=limit)
    except RejectedInput as exc:
        raise fail(str(exc), ExitCode.USAGE) from None
    if as_json:
        # The API's hit (one shape: Hit.shown), with the name the table shows and the matched
        # words on their own.
        print_json(
            [{**h.shown(), "name": h.name, "matches": [t for t, m in h.snippet if m]} for h in hits]
        )
        return
    if not hits:
        note(f"no recording of {owner}'s says {query!r}")
        return
    out = table("id", "name", "where", "at", "words")
    for h in hits:
        words = Text()
        for piece, matched in h.snippet:
            words.append(piece, style="bold reverse" if matched else None)
        at = f"{int(h.start) // 60}:{int(h.start) % 60:02d}" if h.start is not None else ""
        out.add_row(str(h.record_id), h.name, h.kind, at, words)
    console.print(out)


@app.command()
def show(
    record_id: RecordId,
    as_json: JsonOption = False,
) -> None:
    """Show a record's card: stage, halt reason and the way forward, attempts, transcript."""
    from conveyor.audio.cards import described_card
    from conveyor.audio.texts import export_text

    runtime = make_runtime()
    with runtime.engine.connect() as conn:
        row = _record(runtime, conn, record_id)
        text = export_text(conn, record_id)
        card = described_card(conn, row, now=runtime.clock.now())
    status = state_of(row, runtime.audio, runtime.clock.now())
    if as_json:
        card["transcript"] = text["body"] if text else None
        print_json(card)
        return
    print_card(card, text["body"] if text else None, status)


@app.command()
def events(record_id: RecordId, as_json: JsonOption = False) -> None:
    """Show a record's history from the event journal."""
    from conveyor.audio import queries
    from conveyor.clock import iso_utc

    runtime = make_runtime()
    with runtime.engine.connect() as conn:
        _record(runtime, conn, record_id)
        rows = queries.events_of(conn, record_id)
    if as_json:
        print_json(
            [
                {
                    "time": iso_utc(row["created_at"]),
                    "stage": row["stage"],
                    "outcome": row["outcome"],
                    "origin": row["origin"],
                    "text": row["outcome_text"],
                }
                for row in rows
            ]
        )
        return
    out = table("time", "stage", "outcome", "origin", "text")
    for row in rows:
        out.add_row(
            iso_utc(row["created_at"]),
            row["stage"],
            row["outcome"],
            row["origin"],
            row["outcome_text"],
        )
    console.print(out)


@app.command()
def resume(
    record_ids: Annotated[
        list[int] | None,
        typer.Argument(
            metavar="RECORD_IDS",
            help="Ids of halted records.",
            show_default=False,
            parser=IdParser("RECORD"),
        ),
    ] = None,
    reason: Annotated[
        str | None,
        typer.Option(metavar="REASON", help="Every record halted with this reason (e.g. stuck)."),
    ] = None,
    stage: Annotated[
        str | None, typer.Option(metavar="STAGE", help="Every record halted at this stage.")
    ] = None,
    every: Annotated[bool, typer.Option("--all", help="Every halted record.")] = False,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Count and list them; change nothing.")
    ] = False,
    as_json: JsonOption = False,
) -> None:
    """Resume halted records from the stage each reached: by id, or every one halted with a
    reason (--reason), at a stage (--stage), or all (--all); --dry-run counts them first."""
    ids = record_ids or []
    if len(ids) == 1 and not (reason or stage or every or dry_run or as_json):
        _resume_one(ids[0])
        return
    from conveyor.cli.bulk import resume_command

    runtime = make_runtime()
    resume_command(
        runtime,
        runtime.audio,
        "record",
        ids,
        reason=reason,
        stage=stage,
        every=every,
        dry_run=dry_run,
        as_json=as_json,
    )


@app.command("delete")
def delete_records(
    record_ids: Annotated[
        list[int],
        typer.Argument(
            metavar="RECORD_IDS",
            help="Ids of the records to delete.",
            parser=IdParser("RECORD"),
        ),
    ],
    as_json: JsonOption = False,
) -> None:
    """Delete records with their texts, history and every stored object (original, normalized
    audio, raw responses). A step running on one writes nothing afterwards. Idempotent: an id
    that does not exist (any more) is reported, and the exit code is 3."""
    from conveyor.audio.deletion import delete_record

    runtime = make_runtime()
    missing = 0
    for record_id in record_ids:
        deleted = delete_record(runtime.engine, runtime.store, runtime.clock, record_id)
        if as_json:
            print_json_line({"id": record_id, "deleted": deleted})
        elif deleted:
            console.print(f"record {record_id} deleted")
        if not deleted:
            missing += 1
            note(f"record {record_id} does not exist; nothing to delete")
    if missing:
        raise typer.Exit(ExitCode.NOT_FOUND)


def _resume_one(record_id: int) -> None:
    from conveyor.audio import queries
    from conveyor.cli.bulk import resume_one

    runtime = make_runtime()
    resume_one(runtime, runtime.audio, record_id, queries.record_by_id)


def _record(runtime: Runtime, conn: Any, record_id: int) -> RowMapping:
    from conveyor.audio import queries

    row = queries.record_by_id(conn, record_id)
    if row is None:
        raise fail(f"record {record_id} does not exist", ExitCode.NOT_FOUND)
    return row


def _age(seconds: float) -> str:
    """A backlog age, one word for a table column: ``45s``, ``12min``, ``3.5h``, ``2.1d``."""
    if seconds < 120:
        return f"{seconds:.0f}s"
    if seconds < 7200:
        return f"{seconds / 60:.0f}min"
    if seconds < 172800:
        return f"{seconds / 3600:.1f}h"
    return f"{seconds / 86400:.1f}d"


@app.command()
def stats(as_json: JsonOption = False) -> None:
    """Show the backlog of every domain: records waiting and the age of the oldest, per stage.

    Waiting means not halted and not held by a running step. Time spent waiting for a worker is
    backlog and never makes a record stuck.
    """
    from conveyor.pipeline.queries import backlog, now_of

    runtime = make_runtime()
    # The domains as queues: no step is bound, so neither PyAV nor pyvips is loaded, and not
    # the metrics module's Prometheus client either (pipeline.metrics.backlog_of reads the same).
    now = now_of(runtime.clock)
    with runtime.engine.connect() as conn:
        rows = [
            (domain.name, stage, count, age)
            for domain in runtime.queues()
            for stage, count, age in backlog(conn, domain, now)
        ]
    if as_json:
        print_json(
            [
                # No record waiting has no oldest one: null, not an age of 0 (docs/cli.md).
                {
                    "domain": d,
                    "stage": s,
                    "waiting": n,
                    "oldest_seconds": round(age, 3) if n else None,
                }
                for d, s, n, age in rows
            ]
        )
        return
    out = table("domain", "stage", "waiting", "oldest")
    for domain, stage, count, age in rows:
        out.add_row(domain, stage, str(count), _age(age) if count else None)
    console.print(out)
