"""The whole ``conveyor`` command: every group of :data:`conveyor.cli.root.GROUPS` and the
root commands (ingest, worker, serve, backup, restore, version).

Every command module imports only Typer at the top; what a command needs (SQLAlchemy, PyAV,
pyvips, the HTTP app) is imported when it runs, so ``--help`` and ``--version`` start fast. A
run whose first word names a group does not import this module at all
(:func:`conveyor.cli.root.app_for`).
"""

from __future__ import annotations

import logging
from typing import Annotated

import typer

from conveyor import __version__
from conveyor.cli.backup import backup, restore
from conveyor.cli.exits import ExitCode
from conveyor.cli.ingest import ingest
from conveyor.cli.output import JsonOption, fail, note, print_json, setup_logging
from conveyor.cli.root import GROUPS, app_for, group, main, root
from conveyor.cli.serve import serve
from conveyor.cli.settings import make_runtime
from conveyor.cli.signals import stop_on_signals

__all__ = ["app", "app_for", "main"]

app = root
for _name in GROUPS:
    app.add_typer(group(_name), name=_name)
app.alias("ingest", ingest)  # `conveyor records add`, as `media add` adds to albums
app.command()(serve)
app.command()(backup)
app.command()(restore)


@app.command()
def version(as_json: JsonOption = False) -> None:
    """Print the version."""
    if as_json:
        print_json({"version": __version__})
        return
    print(f"conveyor {__version__}")


@app.command()
def worker(
    lanes: Annotated[
        str | None,
        typer.Option(
            metavar="LANES",
            help="Serve only these lanes (comma-separated: audio, short, long); the others' "
            "records wait for a process that serves them. Default: every lane.",
        ),
    ] = None,
    workers: Annotated[
        int | None,
        typer.Option(
            metavar="N",
            help="Worker threads of the audio lane in this process; default [pipeline] "
            "workers. The photo and video lanes take [media] short_workers and long_workers.",
            min=0,
        ),
    ] = None,
    metrics_port: Annotated[
        int | None,
        typer.Option(
            metavar="PORT",
            help="Serve this process's Prometheus metrics at http://HOST:PORT/metrics "
            "(0 = any free port); default: no metrics endpoint.",
            min=0,
            max=65535,
        ),
    ] = None,
    metrics_host: Annotated[
        str, typer.Option(metavar="HOST", help="Address the metrics endpoint listens on.")
    ] = "127.0.0.1",
) -> None:
    """Run the workers of every lane (or of --lanes) until SIGINT/SIGTERM (running steps finish
    or are released)."""
    setup_logging(logging.INFO)
    serve = _parse_lanes(lanes)
    runtime = make_runtime()
    from conveyor.errors import ConfigError

    try:
        counts = runtime.lanes(serve)
    except ConfigError as exc:
        raise fail(str(exc), ExitCode.USAGE) from None
    if workers is not None:
        if "audio" not in counts:
            raise fail(
                "--workers sets the audio lane's workers, but --lanes does not serve audio",
                ExitCode.USAGE,
            )
        counts["audio"] = workers
    if counts.get("audio", 0) > 0:
        from conveyor.cli.startup import check_recognizer

        check_recognizer(runtime)
    stop = stop_on_signals()
    pool = runtime.pool(counts)
    registry = runtime.registry(pool)  # seen by `conveyor workers`; obeys pauses and drains

    def ready() -> tuple[bool, str]:
        if registry.id is None:
            return False, "not registered yet: the database does not answer"
        if registry.drain.is_set():
            return False, "draining"
        if stop.is_set() or pool.stopping:
            return False, "stopping"
        if not pool.running():
            return False, "a lane's worker thread is not running"
        return True, "lanes running: " + ", ".join(f"{k}={v}" for k, v in pool.lanes.items())

    probes = None
    if metrics_port is not None:
        from conveyor.cli.probes import ProbeServer

        try:
            probes = ProbeServer(runtime.engine, ready, metrics_port, metrics_host)
        except OSError as exc:
            raise fail(
                f"cannot serve metrics on {metrics_host}:{metrics_port}: {exc.strerror or exc}; "
                "choose another --metrics-port",
                ExitCode.USAGE,
            ) from None
        probes.start()
        where = f"http://{metrics_host}:{probes.port}"
        note(f"metrics at {where}/metrics (probes: {where}/healthz, {where}/readyz)")
    registry.start()
    pool.start()
    sweeper = runtime.sweeper()  # objects left without a journal row, soon and then hourly
    sweeper.start()
    job_sweeper = runtime.job_sweeper()  # recognizer job folders nothing will collect
    job_sweeper.start()
    from conveyor.cli.drain import wait_for_stop_or_drain

    wait_for_stop_or_drain(stop, registry, pool)
    job_sweeper.stop()
    sweeper.stop()
    pool.stop()
    registry.stop()
    if probes is not None:
        probes.stop()


def _parse_lanes(value: str | None) -> list[str] | None:
    """``--lanes audio,short`` → ``["audio", "short"]``; None when not given."""
    if value is None:
        return None
    names = [part.strip() for part in value.split(",") if part.strip()]
    if not names:
        raise fail("--lanes names no lane; give e.g. --lanes audio,short,long", ExitCode.USAGE)
    return names
