"""``conveyor serve``: the HTTP API, with the worker pool in the same process by default."""

from __future__ import annotations

import logging
import socket
from typing import Annotated

import typer

from conveyor.cli.exits import ExitCode
from conveyor.cli.output import console, fail, setup_logging
from conveyor.cli.settings import make_runtime

__all__ = ["bind", "serve"]


def bind(host: str, port: int) -> socket.socket:
    """A listening TCP socket on ``host:port``, bound before anything says it serves.

    Raises:
        typer.Exit: :attr:`ExitCode.USAGE` when the address is taken or cannot be bound.
    """
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
        sock.listen(2048)
    except OSError as exc:
        sock.close()
        raise fail(
            f"cannot listen on {host}:{port}: {exc.strerror or exc}; is another server using "
            "it? Choose another with --port or [api] port (CONVEYOR_API__PORT)",
            ExitCode.USAGE,
        ) from None
    sock.set_inheritable(True)
    return sock


def serve(
    host: Annotated[
        str | None, typer.Option(metavar="HOST", help="Address to listen on; default [api] host.")
    ] = None,
    port: Annotated[
        int | None,
        typer.Option(
            metavar="PORT",
            help="TCP port (0 = any free port); default [api] port.",
            min=0,
            max=65535,
        ),
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
    from conveyor.api.server import make_server
    from conveyor.web import create_app

    setup_logging(logging.INFO)
    runtime = make_runtime()
    api = runtime.settings.api
    if workers and runtime.settings.pipeline.workers > 0:
        from conveyor.cli.startup import check_recognizer

        check_recognizer(runtime)
    sock = bind(host or api.host, api.port if port is None else port)
    bound_host, bound_port = sock.getsockname()[:2]
    app = create_app(runtime, run_workers=workers)
    server = make_server(app, bound_host, bound_port)
    mode = "API and workers" if workers else "API only"
    console.print(f"conveyor serving {mode} on http://{bound_host}:{bound_port}")
    server.run(sockets=[sock])
