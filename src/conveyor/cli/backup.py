"""``conveyor backup DIR`` and ``conveyor restore DIR``: the embedded default (SQLite and its
objects), consistent while workers run (:mod:`conveyor.objects.backup`)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Annotated

import typer

from conveyor.cli.exits import ExitCode
from conveyor.cli.output import console, fail, note, print_json
from conveyor.sizes import human_size

__all__ = ["backup", "restore"]


def _progress(verb: str) -> Callable[[int, int], None]:
    last = [0.0]

    def report(done: int, total: int) -> None:
        import time

        now = time.monotonic()
        if done == total or now - last[0] > 2:
            last[0] = now
            note(f"{verb} {done}/{total} objects")

    return report


def backup(
    folder: Annotated[
        Path, typer.Argument(metavar="DIR", help="A new (or empty) folder for the backup.")
    ],
    as_json: Annotated[bool, typer.Option("--json", help="Print the result as JSON.")] = False,
) -> None:
    """Back up the embedded database and the objects it names into DIR, consistently, while
    workers and uploads go on (SQLite only; PostgreSQL: see docs/operations.md)."""
    from conveyor import __version__
    from conveyor.cli.settings import make_runtime
    from conveyor.db.migrate import current_revision
    from conveyor.objects.backup import BackupFolderFull
    from conveyor.objects.backup import backup as take_backup

    runtime = make_runtime()
    try:
        report = take_backup(
            runtime.engine,
            runtime.store,
            folder,
            version=__version__,
            revision=current_revision(runtime.engine),
            progress=_progress("copied"),
        )
    except ValueError as exc:
        raise fail(str(exc), ExitCode.USAGE) from None
    except RuntimeError as exc:
        raise fail(str(exc), ExitCode.CONFLICT) from None
    except BackupFolderFull as exc:
        raise fail(
            f"cannot back up: {exc}; nothing was left there: free space, or back up into a "
            "folder on another disk",
            ExitCode.UNAVAILABLE,
        ) from None
    except OSError as exc:
        raise fail(f"the storage cannot be read: {exc}", ExitCode.UNAVAILABLE) from None
    if as_json:
        print_json(
            {
                "folder": str(folder),
                "objects": report.objects,
                "bytes": report.bytes,
                "rounds": report.rounds,
                "seconds": round(report.seconds, 3),
            }
        )
        return
    console.print(
        f"backed up the database and {report.objects} objects ({human_size(report.bytes)}) "
        f"to {folder} in {report.seconds:.1f} s"
    )


def restore(
    folder: Annotated[Path, typer.Argument(metavar="DIR", help="A folder `conveyor backup` made.")],
    replace: Annotated[
        bool,
        typer.Option(
            "--replace",
            help="Replace a database that already holds records (stop every "
            "conveyor process first).",
        ),
    ] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print the result as JSON.")] = False,
) -> None:
    """Restore a backup: its objects into the configured store, its database into the
    configured SQLite file. Stop every conveyor process that uses them first."""
    from conveyor.cli.settings import make_runtime
    from conveyor.db.migrate import current_revision, known_revision
    from conveyor.objects.backup import MANIFEST
    from conveyor.objects.backup import restore as put_back

    runtime = make_runtime(schema=False)
    manifest = folder / MANIFEST
    if not manifest.is_file():
        raise fail(f"{folder} is not a conveyor backup (no {MANIFEST})", ExitCode.USAGE)
    import json

    revision = json.loads(manifest.read_text()).get("schema_revision")
    if revision is not None and not known_revision(str(revision)):
        raise fail(
            f"the backup has schema revision {revision}, newer than this version of Conveyor "
            "knows; restore it with the version that made it",
            ExitCode.SCHEMA,
        )
    if current_revision(runtime.engine) is not None and not replace:
        from conveyor.objects.queries import journal_count

        with runtime.engine.connect() as conn:
            held = journal_count(conn)
        if held:
            raise fail(
                f"the database already holds {held} stored objects' records; give --replace "
                "to overwrite it (stop every conveyor process first)",
                ExitCode.CONFLICT,
            )
    try:
        report = put_back(folder, runtime.engine, runtime.store, progress=_progress("restored"))
    except ValueError as exc:
        raise fail(str(exc), ExitCode.USAGE) from None
    except OSError as exc:
        raise fail(f"the storage cannot be written: {exc}", ExitCode.UNAVAILABLE) from None
    if as_json:
        print_json({"folder": str(folder), "objects": report.objects, "bytes": report.bytes})
        return
    console.print(
        f"restored the database and {report.objects} objects ({human_size(report.bytes)}) "
        f"from {folder}; `conveyor storage check` compares them"
    )
