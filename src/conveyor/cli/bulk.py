"""Resuming halted records one by one or by the hundred (``records resume``, ``media resume``).

After an incident hundreds of records may be halted with one reason. The operator names the
set by ``--reason`` and/or ``--stage`` (or ``--all`` halted records), sees how many match with
``--dry-run``, and resumes them: the set is frozen when it is counted and exactly that set is
resumed (:func:`conveyor.pipeline.resume_many`), so a record halted a moment later is not
swept in unseen.
"""

from __future__ import annotations

from collections.abc import Callable

import typer
from sqlalchemy import Connection, RowMapping

from conveyor.cli.exits import ExitCode
from conveyor.cli.output import console, fail, note, print_json
from conveyor.errors import Conflict, DeclarationError
from conveyor.pipeline import Domain, halted_ids, resume, resume_many
from conveyor.runtime import Runtime

__all__ = ["resume_command", "resume_one"]

# Ids printed by a dry run before the list is cut short.
_SHOWN = 50


def resume_one(
    runtime: Runtime,
    domain: Domain,
    record_id: int,
    read: Callable[[Connection, int], RowMapping | None],
) -> None:
    """Resume one halted record or item and say from which stage; when it is not halted, say
    where it is instead (exit 4), and when it is gone, that it does not exist (exit 3).

    Args:
        read: the row of ``record_id`` (the domain's own read), or None.
    """
    from conveyor.cli.records import state_of

    noun = domain.noun
    try:
        stage = resume(runtime.engine, domain, record_id, clock=runtime.clock)
    except Conflict:
        with runtime.engine.connect() as conn:
            row = read(conn, record_id)
        if row is None:  # deleted between the resume and this read
            raise fail(f"{noun} {record_id} does not exist", ExitCode.NOT_FOUND) from None
        raise fail(
            f"{noun} {record_id} is not halted, so there is nothing to resume: it is "
            f"{state_of(row, domain, runtime.clock.now())}",
            ExitCode.CONFLICT,
        ) from None
    console.print(
        f"{noun} {record_id} resumed at stage {stage}; a running `conveyor worker` (or "
        "`conveyor serve`) moves it on"
    )


def resume_command(
    runtime: Runtime,
    domain: Domain,
    noun: str,
    ids: list[int],
    *,
    reason: str | None,
    stage: str | None,
    every: bool,
    dry_run: bool,
    as_json: bool = False,
) -> None:
    """Resume the halted ``ids``, or the halted set ``reason``/``stage``/``every`` names.

    Ids that are not halted (or do not exist) are reported and left alone. ``as_json`` prints
    ``{"dry_run", "selected", "resumed", "skipped"}`` (id lists) instead of sentences.

    Raises:
        typer.Exit: ``USAGE`` for a contradictory or empty selection, an unknown stage or an
            unknown halt reason (a typo must not resume nothing and succeed).
    """
    filters = reason is not None or stage is not None
    if ids and (filters or every):
        raise fail(
            f"name {noun}s by id, or select them with --reason/--stage/--all; not both",
            ExitCode.USAGE,
        )
    if not ids and not filters and not every:
        raise fail(f"name the halted {noun}s: ids, --reason, --stage, or --all", ExitCode.USAGE)
    if reason is not None:
        from conveyor.runtime import DECLARATIONS

        (declared,) = [d for d in DECLARATIONS if d.name == domain.name]
        known_reasons = sorted({str(m) for kind in declared.halt_reasons for m in kind})
        if reason not in known_reasons:
            raise fail(
                f"unknown halt reason {reason!r}; the {noun} halt reasons are "
                f"{', '.join(known_reasons)}",
                ExitCode.USAGE,
            )
    if stage is not None and stage not in {s.name for s in domain.stages}:
        known = ", ".join(s.name for s in domain.stages)
        raise fail(f"unknown stage {stage!r}; the stages are {known}", ExitCode.USAGE)
    if ids:
        chosen = list(dict.fromkeys(ids))
        label = f"{len(chosen)} {noun}{'' if len(chosen) == 1 else 's'} named"
    else:
        try:
            chosen = halted_ids(runtime.engine, domain, reason=reason, stage=stage)
        except DeclarationError as exc:
            raise fail(str(exc), ExitCode.USAGE) from None
        where = [f"reason {reason}" if reason else "", f"stage {stage}" if stage else ""]
        label = f"{len(chosen)} halted {noun}{'' if len(chosen) == 1 else 's'}" + (
            f" ({', '.join(w for w in where if w)})" if filters else ""
        )
    if dry_run and as_json:
        print_json({"dry_run": True, "selected": chosen, "resumed": [], "skipped": []})
        return
    if dry_run:
        console.print(f"{label} would be resumed (dry run; nothing changed)")
        if chosen:
            shown = ", ".join(str(i) for i in chosen[:_SHOWN])
            more = f" and {len(chosen) - _SHOWN} more" if len(chosen) > _SHOWN else ""
            console.print(f"  ids: {shown}{more}", highlight=False)
        return
    done = resume_many(runtime.engine, domain, chosen, clock=runtime.clock)
    if as_json:
        print_json(
            {
                "dry_run": False,
                "selected": chosen,
                "resumed": list(done.resumed),
                "skipped": list(done.skipped),
            }
        )
        if done.skipped and ids:
            raise typer.Exit(ExitCode.CONFLICT)
        return
    console.print(f"resumed {len(done.resumed)} of {label}")
    if done.resumed:
        note("a running `conveyor worker` (or `conveyor serve`) moves them on")
    if done.skipped:
        skipped = ", ".join(str(i) for i in done.skipped[:_SHOWN])
        console.print(
            f"  {len(done.skipped)} not halted or gone by now, left as they are: {skipped}"
        )
        if ids:  # named ones that could not be resumed: as a single resume would, a conflict
            raise typer.Exit(ExitCode.CONFLICT)
