"""The ``conveyor`` command: ingest, worker, records, db (and serve, users, albums, media)."""

from __future__ import annotations

import logging
from typing import Annotated

import typer

from conveyor import __version__
from conveyor.cli import media, records, users
from conveyor.cli.common import console, make_runtime, setup_logging, stop_on_signals
from conveyor.cli.ingest import ingest
from conveyor.cli.serve import serve
from conveyor.db.migrate import current_revision

app = typer.Typer(
    help="Conveyor: a self-hosted media pipeline (transcripts, photo and video variants).",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
)
db_app = typer.Typer(help="Database schema.", no_args_is_help=True)
app.add_typer(records.app, name="records")
app.add_typer(media.albums_app, name="albums")
app.add_typer(media.media_app, name="media")
app.add_typer(users.users_app, name="users")
app.add_typer(users.tokens_app, name="tokens")
app.add_typer(db_app, name="db")
app.command()(ingest)
app.command()(serve)


@app.command()
def version() -> None:
    """Print the version."""
    console.print(__version__)


@app.command()
def worker(
    workers: Annotated[
        int | None, typer.Option(help="Audio workers; default \\[pipeline] workers.", min=0)
    ] = None,
) -> None:
    """Run the worker pool until SIGINT/SIGTERM (then finish or release running steps)."""
    setup_logging(logging.INFO)
    runtime = make_runtime()
    lanes = runtime.lanes()
    if workers is not None:
        lanes["audio"] = workers
    stop = stop_on_signals()
    pool = runtime.pool(lanes)
    pool.start()
    stop.wait()
    pool.stop()


@db_app.command("upgrade")
def db_upgrade() -> None:
    """Create or upgrade the schema to the newest revision."""
    runtime = make_runtime(migrate=False)
    runtime.migrate()
    console.print(f"database at revision {current_revision(runtime.engine)}")


def main() -> None:
    """Console-script entry point."""
    app()
