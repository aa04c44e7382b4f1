"""``conveyor serve``: the HTTP API, with the worker pool in the same process by default."""

from __future__ import annotations

import logging
from typing import Annotated

import typer

from conveyor.api.app import create_app
from conveyor.api.server import make_server
from conveyor.cli.common import console, make_runtime, setup_logging

__all__ = ["serve"]


def serve(
    host: Annotated[str | None, typer.Option(help="Address to bind; default \\[api] host.")] = None,
    port: Annotated[
        int | None, typer.Option(help="Port; default \\[api] port.", min=0, max=65535)
    ] = None,
    workers: Annotated[
        bool,
        typer.Option(
            "--workers/--no-workers",
            help="Run the worker pool in this process (default), or serve the API only "
            "beside `conveyor worker` processes.",
        ),
    ] = True,
) -> None:
    """Serve the HTTP API (and the workers) until SIGINT/SIGTERM."""
    setup_logging(logging.INFO)
    runtime = make_runtime()
    api = runtime.settings.api
    app = create_app(runtime, run_workers=workers)
    server = make_server(app, host or api.host, api.port if port is None else port)
    mode = "API and workers" if workers else "API only"
    console.print(f"conveyor serving {mode} on http://{server.config.host}:{server.config.port}")
    server.run()
