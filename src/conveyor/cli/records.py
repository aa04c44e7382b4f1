"""``conveyor records``: list, show, events, resume (the operator's tools, P9, P11)."""

from __future__ import annotations

import json
from typing import Annotated

import typer
from rich.table import Table

from conveyor.audio import queries
from conveyor.audio.cards import record_card, transcript_of
from conveyor.cli.common import console, fail, make_runtime
from conveyor.clock import iso_utc
from conveyor.errors import Conflict, NotFound
from conveyor.pipeline import resume as resume_record

app = typer.Typer(help="Inspect audio records and resume halted ones.", no_args_is_help=True)


def print_card(card: dict[str, object], transcript: str | None) -> None:
    """Print a record card and its transcript for a person."""
    state = "[green]done[/green]" if card["done"] else str(card["stage"])
    if card["halted"]:
        state = f"[red]halted[/red] at {card['stage']} — {card['halt_reason']}"
    console.print(f"[bold]record {card['id']}[/bold]  {card['original_name'] or ''}")
    console.print(f"  owner      {card['owner']}")
    if card["title"]:
        console.print(f"  title      {card['title']}")
    console.print(f"  state      {state}")
    if card["halted"]:
        console.print(f"  reason     {card['halt_error']}")
    if card["duration"] is not None:
        console.print(f"  duration   {card['duration']:.2f} s")
    if card["detected_language"]:
        console.print(f"  language   {card['detected_language']}")
    console.print(f"  created    {card['created_at']}")
    if transcript is not None:
        if card["no_speech"]:
            console.print("  transcript [dim](no speech detected)[/dim]")
        else:
            console.print("  transcript", style="bold")
            console.print(f"    {transcript}", markup=False, highlight=False)


@app.command("list")
def list_(
    owner: Annotated[str | None, typer.Option(help="Only this owner's records.")] = None,
    stage: Annotated[str | None, typer.Option(help="Only records at this stage.")] = None,
    halted: Annotated[bool, typer.Option("--halted", help="Only halted records.")] = False,
    limit: Annotated[int, typer.Option(min=1, max=1000)] = 50,
) -> None:
    """List records, newest first."""
    runtime = make_runtime()
    stages = [s.name for s in runtime.audio.stages]
    if stage is not None and stage not in stages:
        raise fail(f"unknown stage {stage!r}; the stages are {', '.join(stages)}", 2)
    with runtime.engine.connect() as conn:
        rows = queries.list_records(
            conn, owner=owner, stage=stage, halted=True if halted else None, limit=limit
        )
    table = Table("id", "owner", "name", "stage", "halted", "created")
    for row in rows:
        table.add_row(
            str(row["id"]),
            row["owner"],
            row["original_name"] or "",
            row["stage"],
            row["halt_reason"] or "",
            iso_utc(row["created_at"]) or "",
        )
    console.print(table)


@app.command()
def show(
    record_id: Annotated[int, typer.Argument(help="The record's id.")],
    as_json: Annotated[bool, typer.Option("--json", help="Print the card as JSON.")] = False,
) -> None:
    """Show a record's card: stage, halt flag and reason, transcript."""
    runtime = make_runtime()
    with runtime.engine.connect() as conn:
        row = queries.record_by_id(conn, record_id)
        if row is None:
            raise fail(f"record {record_id} does not exist")
        text = transcript_of(conn, record_id)
    card = record_card(row)
    if as_json:
        card["transcript"] = text["body"] if text else None
        console.print_json(json.dumps(card))
        return
    print_card(card, text["body"] if text else None)


@app.command()
def events(record_id: Annotated[int, typer.Argument(help="The record's id.")]) -> None:
    """Show a record's history from the event journal (D14)."""
    runtime = make_runtime()
    with runtime.engine.connect() as conn:
        if queries.record_by_id(conn, record_id) is None:
            raise fail(f"record {record_id} does not exist")
        rows = queries.events_of(conn, record_id)
    table = Table("time", "stage", "outcome", "origin", "text")
    for row in rows:
        table.add_row(
            iso_utc(row["created_at"]) or "",
            row["stage"],
            row["outcome"],
            row["origin"],
            row["outcome_text"] or "",
        )
    console.print(table)


@app.command()
def resume(record_id: Annotated[int, typer.Argument(help="The halted record's id.")]) -> None:
    """Resume a halted record from the stage it reached (P9)."""
    runtime = make_runtime()
    try:
        stage = resume_record(runtime.engine, runtime.audio, record_id, clock=runtime.clock)
    except NotFound as exc:
        raise fail(str(exc)) from None
    except Conflict as exc:
        raise fail(str(exc)) from None
    runtime.notifier.publish()
    console.print(f"record {record_id} resumed at stage [bold]{stage}[/bold]")
