"""``conveyor db``: the database schema."""

from __future__ import annotations

from conveyor.cli.exits import ExitCode
from conveyor.cli.groups import CommandGroup
from conveyor.cli.output import JsonOption, fail, print_json
from conveyor.cli.settings import make_runtime

__all__ = ["db_app"]

db_app = CommandGroup(help="The database schema.")


@db_app.command("upgrade")
def db_upgrade(as_json: JsonOption = False) -> None:
    """Create the schema, or upgrade it to this version's (back up the database first)."""
    from sqlalchemy.exc import SQLAlchemyError

    from conveyor.cli.settings import database_unreachable, describe_database
    from conveyor.db.migrate import current_revision, head_revision, known_revision

    runtime = make_runtime(schema=False)
    try:
        before = current_revision(runtime.engine)
        if before is not None and not known_revision(before):
            raise fail(
                f"the database has schema revision {before}, newer than this version of "
                f"Conveyor knows (its newest is {head_revision()}); upgrade Conveyor",
                ExitCode.SCHEMA,
            )
        runtime.migrate()
        after = current_revision(runtime.engine)
    except SQLAlchemyError as exc:
        raise database_unreachable(runtime.settings, exc) from None
    where = describe_database(runtime.settings)
    if as_json:
        print_json({"database": where, "before": before, "after": after})
        return
    if before == after:
        print(f"database {where} already at revision {after}")
    else:
        print(f"database {where} upgraded from revision {before or 'none'} to {after}")
