"""``conveyor storage …``: the journal against the store (``check``) and the orphan sweep on
demand (``sweep``)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any

import typer

from conveyor.cli.exits import ExitCode
from conveyor.cli.groups import CommandGroup
from conveyor.cli.output import console, fail, note, print_json
from conveyor.cli.settings import make_runtime
from conveyor.sizes import human_size

if TYPE_CHECKING:
    from conveyor.objects.reconcile import StorageReport

__all__ = ["storage_app"]

storage_app = CommandGroup(help="The object store against the journal: check, sweep.")


def _unavailable(exc: OSError) -> typer.Exit:
    return fail(f"the storage cannot be used: {exc}", ExitCode.UNAVAILABLE)


def _exit_code(report: StorageReport) -> int:
    code = 0
    if report.missing:
        code |= ExitCode.MISSING_OBJECTS
    if report.mismatched:
        code |= ExitCode.SIZE_MISMATCHES
    if report.orphans:
        code |= ExitCode.ORPHANS
    return code


def _document(report: StorageReport) -> dict[str, Any]:
    return {
        "journaled": report.journaled,
        "stored": report.stored,
        "missing": report.missing,
        "mismatched": [
            {"key": m.key, "journal_size": m.journal_size, "stored_size": m.stored_size}
            for m in report.mismatched
        ],
        "orphans": report.orphans,
        "orphan_bytes": report.orphan_bytes,
        "recent": report.recent,
        "agrees": report.agrees,
    }


@storage_app.command("check")
def storage_check(
    limit: Annotated[
        int,
        typer.Option(
            metavar="N", min=0, help="List at most N keys of each kind (the counts are whole)."
        ),
    ] = 20,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print the whole report (every key) as JSON.")
    ] = False,
) -> None:
    """Compare the journal with the store: objects missing, sizes that differ, orphans. Exit 0
    when they agree; else 8 (missing), 16 (sizes), 32 (orphans), summed. Changes nothing."""
    import time

    from conveyor.objects.reconcile import check_storage

    runtime = make_runtime()
    grace = runtime.settings.storage.sweep_grace
    try:
        report = check_storage(runtime.engine, runtime.store, grace=grace, now=time.time())
    except OSError as exc:
        raise _unavailable(exc) from None
    code = _exit_code(report)
    if as_json:
        print_json(_document(report))
        raise typer.Exit(code)
    console.print(f"journal rows      {report.journaled}")
    console.print(f"stored objects    {report.stored}")
    console.print(f"missing objects   {len(report.missing)}")
    console.print(f"size mismatches   {len(report.mismatched)}")
    console.print(f"orphans           {len(report.orphans)} ({human_size(report.orphan_bytes)})")
    console.print(f"recent, unjournaled {report.recent} (younger than {grace:g} s: not counted)")
    for key in report.missing[:limit]:
        console.print(f"missing   {key}")
    for m in report.mismatched[:limit]:
        console.print(f"size      {m.key}  journal {m.journal_size} B, stored {m.stored_size} B")
    for key in report.orphans[:limit]:
        console.print(f"orphan    {key}")
    if report.agrees:
        note("the journal and the store agree")
    else:
        if report.orphans:
            note("orphans: `conveyor storage sweep` removes them")
        if report.missing or report.mismatched:
            note(
                "missing or differing objects: restore them from a backup of the store taken "
                "with the database (docs/operations.md, Backup and restore)"
            )
    raise typer.Exit(code)


@storage_app.command("sweep")
def storage_sweep(
    grace: Annotated[
        float | None,
        typer.Option(
            metavar="SECONDS",
            min=0,
            help="Remove only orphans older than this; default [storage] sweep_grace.",
        ),
    ] = None,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="List what would be removed; remove nothing.")
    ] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print the result as JSON.")] = False,
) -> None:
    """Remove stored objects without a journal row (and unfinished writes) now, as the
    workers' periodic sweep does."""
    import time

    from conveyor.objects.sweep import sweep_orphans

    runtime = make_runtime()
    age = runtime.settings.storage.sweep_grace if grace is None else grace
    try:
        report = sweep_orphans(
            runtime.engine, runtime.store, grace=age, now=time.time(), dry_run=dry_run
        )
    except OSError as exc:
        raise _unavailable(exc) from None
    if as_json:
        print_json(
            {
                "examined": report.examined,
                "removed": report.removed,
                "removed_bytes": report.removed_bytes,
                "aborted": report.aborted,
                "dry_run": dry_run,
            }
        )
        return
    verb = "would remove" if dry_run else "removed"
    for key in report.removed:
        console.print(f"{verb}  {key}")
    note(
        f"examined {report.examined} objects; {verb} {len(report.removed)} without a journal "
        f"row ({human_size(report.removed_bytes)}) older than {age:g} s"
        + ("" if dry_run else f"; aborted {report.aborted} unfinished writes")
    )
