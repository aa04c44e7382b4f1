"""The no-op task of the queues the engine benchmark compares against, in the module their own
command-line workers load, as their users run them (``bench/bench_engine.py`` starts them):

* huey: ``huey_consumer bench.peer_tasks.huey -w W -k thread``, the SQLite file named by
  ``BENCH_HUEY_FILE``;
* pgqueuer: :func:`pgqueuer_drain` (what ``pgq run bench.peer_tasks:pgqueuer_main --mode
  drain`` runs), the database named by ``BENCH_PGQUEUER_DSN`` (W such processes for W
  workers).
"""

from __future__ import annotations

import os
from typing import Any

try:
    from huey import SqliteHuey  # type: ignore[import-untyped]
except ImportError:  # the bench extra is not installed: huey is not measured
    huey = None
else:
    # Only where the benchmark names the file (pgqueuer's processes import this module too).
    _file = os.environ.get("BENCH_HUEY_FILE")
    huey = SqliteHuey(filename=_file, results=False) if _file else None

if huey is not None:

    @huey.task()  # type: ignore[untyped-decorator]
    def nothing() -> None:
        """The no-op task."""
        return None


async def pgqueuer_main() -> Any:
    """pgqueuer's factory (``pgq run``): a queue manager whose ``noop`` entrypoint does nothing."""
    import psycopg
    from pgqueuer.db import PsycopgDriver
    from pgqueuer.qm import QueueManager
    from pgqueuer.queries import Queries

    conn = await psycopg.AsyncConnection.connect(os.environ["BENCH_PGQUEUER_DSN"], autocommit=True)
    manager = QueueManager(Queries(PsycopgDriver(conn)))

    @manager.entrypoint("noop")
    async def noop(_job: Any) -> None:
        return None

    return manager


async def pgqueuer_drain() -> None:
    """What ``pgq run bench.peer_tasks:pgqueuer_main --mode drain`` does with its defaults
    (batch size 10), called directly: the ``pgq`` command of pgqueuer 1.6 fails at start with
    the installed Typer (``AttributeError`` in its logger set-up)."""
    from pgqueuer.types import QueueExecutionMode

    manager = await pgqueuer_main()
    await manager.run(batch_size=10, mode=QueueExecutionMode.drain)
