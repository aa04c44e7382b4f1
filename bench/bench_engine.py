"""Drain rate of the pipeline engine beside its floor and two other queues, in one run.

Every case drains ``--records`` no-op records (a one-stage domain whose step only advances) and
reports records per second, CPU per record (this process and its children; on PostgreSQL also
the server's, from /proc), statements and round trips per record (thread cases, counted at the
driver), the ratio to the raw floor and to the other queue, and the load average.

Cases, on SQLite and (with ``--postgres URL``) PostgreSQL, at 1 and 4 workers:

* ``conveyor threads``: one :class:`~conveyor.pipeline.WorkerPool` with W worker threads.
* ``conveyor processes``: W processes, each a pool with one worker.
* ``floor``: W threads on the bare driver, each looping "one-statement claim (``UPDATE …
  RETURNING``, SKIP LOCKED on PostgreSQL), then a token-checked done", one commit each; and the
  same claiming 10 per statement.
* ``floor, 100 claims a statement`` (PostgreSQL): the same, claiming 100 per statement.
* ``huey`` (SQLite) / ``pgqueuer`` (PostgreSQL), when installed (``pip install -e .[bench]``):
  a no-op task run by the queue's own command-line worker in its own process, as its users
  run it (:mod:`bench.peer_tasks`): ``huey_consumer … -w W -k thread``, or W processes each
  running a pgqueuer queue manager in drain mode as ``pgq run`` does; timed from the first
  task taken to the last (start-up excluded).

The conveyor cases also report claim-to-done p50 and p99: from a record's claim (the database's
time its claim statement wrote) to its save (its journal row's time), both on the database's
clock.

Run: ``.venv/bin/python bench/bench_engine.py [--records 20000] [--postgres postgresql://…]``.
The PostgreSQL database is used as given: the engine schema is migrated there, and the tables
``bench_jobs``, ``bench_floor`` and pgqueuer's own are dropped and re-created.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import functools
import multiprocessing
import os
import resource
import signal
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sqlalchemy import (
    Column,
    Double,
    Engine,
    Integer,
    MetaData,
    Table,
    event,
    insert,
    select,
    text,
)

from conveyor.clock import SystemClock
from conveyor.config import PipelineSettings
from conveyor.db.engine import make_engine
from conveyor.db.migrate import upgrade
from conveyor.db.tables import queue_columns, queue_indexes
from conveyor.pipeline import Advance, Domain, Stage, StepContext, WorkerPool
from conveyor.pipeline.outcomes import Outcome

bench_metadata = MetaData()
bench_jobs = Table(
    "bench_jobs",
    bench_metadata,
    Column("id", Integer, primary_key=True),
    Column("sort_value", Double, nullable=False),
    # The database's time of the record's claim, written by its step (claim-to-done).
    Column("claimed_at", Double),
    *queue_columns(),
)
# The engine's indexes every record table has (claim order over open records, records begun in
# their stage for D19, running steps for the rescuer): without the last, the rescuer's look for
# lapsed claims would read the whole table every poll.
queue_indexes(bench_jobs, bench_jobs.c.sort_value)
_open = (bench_jobs.c.halted_at.is_(None)) & (bench_jobs.c.stage != "done")
LANE = "bench"
ROOT = Path(__file__).resolve().parents[1]

# Steps run in this process, and the event set once as many ran as the case has records: the
# thread cases wait on it, then look at the database for the last saves only.
_steps = {"count": 0, "target": -1}
_steps_lock = threading.Lock()
_all_ran = threading.Event()


def noop(ctx: StepContext) -> Outcome:
    with _steps_lock:
        _steps["count"] += 1
        if _steps["count"] == _steps["target"]:
            _all_ran.set()
    return Advance(fields={"claimed_at": ctx.record["work_started_at"]})


def bench_domain() -> Domain:
    return Domain(
        name="bench",
        table=bench_jobs,
        stages=[Stage("new", noop, lane=LANE, lease=60), Stage("done")],
        order_by=[bench_jobs.c.sort_value],
        owned_fields=frozenset({"claimed_at"}),
    )


@dataclass
class Result:
    database: str
    case: str
    workers: int
    records: int
    seconds: float
    cpu: float
    server_cpu: float | None = None
    statements: int | None = None
    round_trips: int | None = None
    done_p50: float | None = None
    done_p99: float | None = None

    @property
    def rate(self) -> float:
        return self.records / self.seconds


# -- measuring ----------------------------------------------------------------------------


def _own_cpu() -> float:
    me = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


def _postgres_cpu() -> float:
    """CPU seconds of every process named ``postgres`` on this machine (server side)."""
    total = 0
    tick = os.sysconf("SC_CLK_TCK")
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            continue
        name = stat[stat.index("(") + 1 : stat.rindex(")")]
        if name.startswith("postgres"):
            fields = stat[stat.rindex(")") + 2 :].split()
            total += int(fields[11]) + int(fields[12])
    return total / tick


def measure(
    database: str,
    case: str,
    workers: int,
    records: int,
    run: Callable[[], None],
    counted: Engine | None = None,
) -> Result:
    counts = {"statements": 0, "round_trips": 0}
    lock = threading.Lock()

    def on_statement(*_a: Any) -> None:
        with lock:
            counts["statements"] += 1
            counts["round_trips"] += 1

    def on_control(*_a: Any) -> None:
        with lock:
            counts["round_trips"] += 1

    if counted is not None:
        event.listen(counted, "before_cursor_execute", on_statement)
        for name in ("begin", "commit", "rollback"):
            event.listen(counted, name, on_control)
    server = _postgres_cpu() if database == "postgresql" else None
    cpu = _own_cpu()
    started = time.perf_counter()
    try:
        run()
    finally:
        seconds = time.perf_counter() - started
        if counted is not None:
            event.remove(counted, "before_cursor_execute", on_statement)
            for name in ("begin", "commit", "rollback"):
                event.remove(counted, name, on_control)
    return Result(
        database,
        case,
        workers,
        records,
        seconds,
        _own_cpu() - cpu,
        None if server is None else _postgres_cpu() - server,
        counts["statements"] if counted is not None else None,
        counts["round_trips"] if counted is not None else None,
    )


# -- Conveyor -----------------------------------------------------------------------------


def seed_jobs(engine: Engine, records: int) -> None:
    bench_metadata.drop_all(engine)
    bench_metadata.create_all(engine)
    now = time.time()
    rows = [
        {
            "sort_value": float(i),
            "stage": "new",
            "state_entered_at": now,
            "attempts": 0,
            "updated_at": now,
        }
        for i in range(records)
    ]
    with engine.begin() as conn:
        conn.execute(text("DELETE FROM record_events WHERE domain = 'bench'"))
        for start in range(0, records, 5000):
            conn.execute(insert(bench_jobs), rows[start : start + 5000])
    _analyze(engine, "bench_jobs")


def _analyze(engine: Engine, table: str) -> None:
    """Give PostgreSQL's planner the table's statistics, as autovacuum soon would: without
    them it guesses a freshly filled table is tiny and sorts every open row per claim."""
    if engine.dialect.name == "postgresql":
        with engine.begin() as conn:
            conn.execute(text(f"ANALYZE {table}"))


def open_jobs(engine: Engine) -> bool:
    """Whether any record is still open (one step of the claim index: cheap to ask often)."""
    with engine.connect() as conn:
        return conn.execute(select(bench_jobs.c.id).where(_open).limit(1)).first() is not None


def wait_drained(engine: Engine, poll: float = 0.01) -> None:
    while open_jobs(engine):
        time.sleep(poll)


def wait_ran_and_drained(engine: Engine) -> None:
    """Wait for this process's steps to have run every record, then for the last saves (the
    database is asked only then, so the wait takes nothing from the workers' threads)."""
    _all_ran.wait()
    wait_drained(engine, 0.002)


def claim_to_done(engine: Engine, result: Result) -> Result:
    """Fill ``result``'s claim-to-done percentiles (milliseconds, the database's clock)."""
    with engine.connect() as conn:
        spans = sorted(
            float(r[0])
            for r in conn.execute(
                text(
                    "SELECT e.created_at - j.claimed_at FROM record_events e "
                    "JOIN bench_jobs j ON j.id = e.record_id "
                    "WHERE e.domain = 'bench' AND e.outcome = 'advanced'"
                )
            )
        )
    if spans:
        result.done_p50 = statistics.median(spans) * 1000
        result.done_p99 = spans[min(len(spans) - 1, int(len(spans) * 0.99))] * 1000
    return result


def bench_settings() -> PipelineSettings:
    return PipelineSettings(poll_interval=0.05, stop_grace=10.0)


def conveyor_threads(url: str, engine: Engine, workers: int, records: int, db: str) -> Result:
    seed_jobs(engine, records)
    counted = make_engine(url, pool_size=workers + 2)
    pool = WorkerPool(
        counted, [bench_domain()], {LANE: workers}, clock=SystemClock(), settings=bench_settings()
    )

    def run() -> None:
        pool.start()
        wait_ran_and_drained(engine)
        pool.stop()  # inside the measurement: the counters must not change under a worker

    with _steps_lock:
        _steps.update(count=0, target=records)
        _all_ran.clear()
    try:
        return claim_to_done(
            engine, measure(db, "conveyor threads", workers, records, run, counted)
        )
    finally:
        counted.dispose()


def conveyor_processes(url: str, engine: Engine, workers: int, records: int, db: str) -> Result:
    """W processes with one worker each; the time runs from all being ready to the last record
    done (start-up and shut-down excluded), CPU is what the workers spent in that time."""
    seed_jobs(engine, records)
    ctx = multiprocessing.get_context("spawn")
    ready = ctx.Barrier(workers + 1)
    drained = ctx.Event()
    spent: Any = ctx.Queue()
    procs = [
        ctx.Process(target=_process_worker, args=(url, ready, drained, spent))
        for _ in range(workers)
    ]
    for proc in procs:
        proc.start()

    # The clock starts once every worker is ready: a spawned worker takes seconds to import
    # the project on a loaded machine, which is start-up, not draining.
    ready.wait()
    result = measure(db, "conveyor processes", workers, records, lambda: wait_drained(engine))
    drained.set()
    result.cpu = sum(spent.get() for _ in procs)
    for proc in procs:
        proc.join()
    return claim_to_done(engine, result)


def _process_worker(url: str, ready: Any, drained: Any, spent: Any) -> None:
    """One process, one pool with one worker, until the parent sees every record done."""
    engine = make_engine(url, pool_size=3)
    pool = WorkerPool(
        engine, [bench_domain()], {LANE: 1}, clock=SystemClock(), settings=bench_settings()
    )
    engine.connect().close()
    ready.wait()
    started = time.process_time()
    pool.start()
    drained.wait()
    spent.put(time.process_time() - started)
    pool.stop()
    engine.dispose()


# -- the floor: the bare driver -----------------------------------------------------------


def _floor_sql(postgres: bool, per_statement: int) -> tuple[str, str]:
    lock = " FOR UPDATE SKIP LOCKED" if postgres else ""
    token = (
        "replace(CAST(gen_random_uuid() AS TEXT), '-', '')"
        if postgres
        else "lower(hex(randomblob(16)))"
    )
    mark = "%s" if postgres else "?"
    claim = (
        f"UPDATE bench_floor SET token = {token} WHERE id IN (SELECT id FROM bench_floor "
        f"WHERE stage = 'new' AND token IS NULL ORDER BY sort_value, id LIMIT {per_statement}"
        f"{lock}) RETURNING id, token"
    )
    done = (
        f"UPDATE bench_floor SET stage = 'done', token = NULL WHERE id = {mark} AND token = {mark}"
    )
    return claim, done


def seed_floor(connect: Callable[[], Any], records: int) -> None:
    conn = connect()
    cur = conn.cursor()
    cur.execute("DROP TABLE IF EXISTS bench_floor")
    cur.execute(
        "CREATE TABLE bench_floor (id INTEGER PRIMARY KEY, sort_value DOUBLE PRECISION NOT NULL, "
        "stage VARCHAR(32) NOT NULL, token VARCHAR(32))"
    )
    cur.execute("CREATE INDEX ix_bench_floor ON bench_floor (sort_value, id) WHERE stage = 'new'")
    mark = "%s" if "psycopg" in type(conn).__module__ else "?"
    cur.executemany(
        f"INSERT INTO bench_floor (id, sort_value, stage) VALUES ({mark}, {mark}, 'new')",
        [(i + 1, float(i)) for i in range(records)],
    )
    conn.commit()
    if mark == "%s":
        cur.execute("ANALYZE bench_floor")  # as for the engine's table (see _analyze)
        conn.commit()
    conn.close()


def floor(
    connect: Callable[[], Any], workers: int, records: int, db: str, per_statement: int
) -> Result:
    seed_floor(connect, records)
    claim, done = _floor_sql(db == "postgresql", per_statement)

    def worker() -> None:
        conn = connect()
        cur = conn.cursor()
        while True:
            cur.execute(claim)
            rows = cur.fetchall()
            conn.commit()
            if not rows:
                break
            for row in rows:
                cur.execute(done, (row[0], row[1]))
                conn.commit()
        conn.close()

    def run() -> None:
        threads = [threading.Thread(target=worker) for _ in range(workers)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()

    case = f"floor, {per_statement} claim{'s' if per_statement > 1 else ''} a statement"
    return measure(db, case, workers, records, run)


# -- other queues -------------------------------------------------------------------------


def _process_cpu(pids: list[int]) -> float:
    """CPU seconds (user + system, every thread) the processes ``pids`` have used so far."""
    tick = os.sysconf("SC_CLK_TCK")
    total = 0
    for pid in pids:
        with contextlib.suppress(OSError):
            stat = Path(f"/proc/{pid}/stat").read_text()
            fields = stat[stat.rindex(")") + 2 :].split()
            total += int(fields[11]) + int(fields[12])
    return total / tick


def _peer_run(
    database: str,
    case: str,
    workers: int,
    records: int,
    commands: list[list[str]],
    env: dict[str, str],
    left: Callable[[], int],
) -> Result:
    """Start the peer's worker processes and time them from the first task taken (``left()``
    below ``records``) until none is left; their CPU is read from /proc over that time."""
    procs = [
        subprocess.Popen(c, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        for c in commands
    ]
    pids = [p.pid for p in procs]
    try:
        deadline = time.monotonic() + 300
        while left() >= records:
            if time.monotonic() > deadline or any(p.poll() is not None for p in procs):
                errors = b"".join(p.stderr.read() if p.stderr else b"" for p in procs)
                raise RuntimeError(f"{case}: no task taken: {errors.decode()[-2000:]}")
            time.sleep(0.002)
        started = time.perf_counter()
        cpu = _process_cpu(pids)
        server = _postgres_cpu() if database == "postgresql" else None
        while left() > 0:
            time.sleep(0.005)
        seconds = time.perf_counter() - started
        cpu = _process_cpu(pids) - cpu
        server = None if server is None else _postgres_cpu() - server
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGINT)
        for proc in procs:
            try:
                proc.wait(20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
    return Result(database, case, workers, records, seconds, cpu, server)


def huey_case(folder: Path, workers: int, records: int) -> Result | None:
    """huey's own consumer in its own process, W worker threads (``-k thread``)."""
    try:
        from huey import SqliteHuey
    except ImportError:
        return None
    path = folder / f"huey-{workers}.db"
    env = {**os.environ, "BENCH_HUEY_FILE": str(path), "PYTHONPATH": str(ROOT)}
    enqueue = f"import bench.peer_tasks as t\nfor _ in range({records}): t.nothing()"
    subprocess.run([sys.executable, "-c", enqueue], cwd=ROOT, env=env, check=True)
    queue = SqliteHuey(filename=str(path), results=False)
    consumer = str(Path(sys.executable).with_name("huey_consumer"))
    command = [consumer, "bench.peer_tasks.huey", "-w", str(workers), "-k", "thread", "-q"]
    return _peer_run(
        "sqlite", "huey threads", workers, records, [command], env, queue.pending_count
    )


def pgqueuer_case(dsn: str, workers: int, records: int) -> Result | None:
    """W processes, each a pgqueuer queue manager draining the queue (``pgq run``'s own)."""
    try:
        import psycopg
        from pgqueuer.db import PsycopgDriver
        from pgqueuer.queries import Queries
    except ImportError:
        return None

    async def prepare() -> None:
        conn = await psycopg.AsyncConnection.connect(dsn, autocommit=True)
        queries = Queries(PsycopgDriver(conn))
        with contextlib.suppress(Exception):  # not installed yet
            await queries.uninstall()
        await queries.install()
        for start in range(0, records, 5000):
            count = min(5000, records - start)
            await queries.enqueue(["noop"] * count, [None] * count, [0] * count)
        await conn.close()

    asyncio.run(prepare())
    env = {**os.environ, "BENCH_PGQUEUER_DSN": dsn, "PYTHONPATH": str(ROOT)}
    drain = "import asyncio, bench.peer_tasks as t; asyncio.run(t.pgqueuer_drain())"
    command = [sys.executable, "-c", drain]
    counter = psycopg.connect(dsn, autocommit=True)

    def left() -> int:
        row = counter.execute("SELECT count(*) FROM pgqueuer").fetchone()
        return int(row[0]) if row else 0

    try:
        return _peer_run("postgresql", "pgqueuer", workers, records, [command] * workers, env, left)
    finally:
        counter.close()


# -- report -------------------------------------------------------------------------------


def report(results: list[Result]) -> None:
    print(f"load average before the report: {os.getloadavg()}")
    header = (
        f"{'database':<11}{'case':<31}{'W':>3}{'rec/s':>10}{'x floor':>9}{'x other':>9}"
        f"{'ms/rec':>8}{'CPU ms/rec':>11}{'server':>8}{'stmts':>7}{'trips':>7}"
        f"{'done p50':>9}{'p99':>8}"
    )
    print(header)
    for r in results:
        floor_rate = next(
            (
                f.rate
                for f in results
                if f.database == r.database
                and f.workers == r.workers
                and f.case == "floor, 1 claim a statement"
            ),
            None,
        )
        other = next(
            (
                o.rate
                for o in results
                if o.database == r.database
                and o.workers == r.workers
                and o.case in ("huey threads", "pgqueuer")
            ),
            None,
        )
        stmts = "" if r.statements is None else f"{r.statements / r.records:.2f}"
        trips = "" if r.round_trips is None else f"{r.round_trips / r.records:.2f}"
        server = "" if r.server_cpu is None else f"{1000 * r.server_cpu / r.records:.2f}"
        p50 = "" if r.done_p50 is None else f"{r.done_p50:.1f}"
        p99 = "" if r.done_p99 is None else f"{r.done_p99:.1f}"
        print(
            f"{r.database:<11}{r.case:<31}{r.workers:>3}{r.rate:>10.0f}"
            f"{(r.rate / floor_rate if floor_rate else 0):>9.2f}"
            f"{(r.rate / other if other else 0):>9.2f}"
            f"{1000 * r.seconds / r.records:>8.3f}"
            f"{1000 * r.cpu / r.records:>11.3f}{server:>8}{stmts:>7}{trips:>7}{p50:>9}{p99:>8}"
        )


def _sqlite_connect(path: Path) -> Any:
    conn = sqlite3.connect(path, timeout=60, check_same_thread=False)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=NORMAL")
    return conn


def _postgres_connect(dsn: str) -> Any:
    import psycopg

    return psycopg.connect(dsn)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=20000)
    parser.add_argument("--postgres", help="a PostgreSQL URL to measure as well")
    parser.add_argument("--workers", default="1,4", help="worker counts, comma-separated")
    args = parser.parse_args()
    counts = [int(w) for w in args.workers.split(",")]
    results: list[Result] = []
    print(f"load average at start: {os.getloadavg()}, {os.cpu_count()} CPUs")
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        databases = [("sqlite", f"sqlite:///{folder / 'bench.db'}")]
        if args.postgres:
            databases.append(("postgresql", args.postgres))
        for db, url in databases:
            engine = make_engine(url, pool_size=4)
            upgrade(engine)
            for workers in counts:
                dsn = engine.url.set(drivername="postgresql").render_as_string(False)
                connect: Callable[[], Any] = (
                    functools.partial(_sqlite_connect, folder / "floor.db")
                    if db == "sqlite"
                    else functools.partial(_postgres_connect, dsn)
                )

                for per in (1, 10) if db == "sqlite" else (1, 10, 100):
                    results.append(floor(connect, workers, args.records, db, per))
                    print(results[-1])
                if db == "sqlite":
                    other = huey_case(folder, workers, args.records)
                else:
                    other = pgqueuer_case(dsn, workers, args.records)
                if other is not None:
                    results.append(other)
                    print(results[-1])
                results.append(conveyor_threads(url, engine, workers, args.records, db))
                print(results[-1])
                results.append(conveyor_processes(url, engine, workers, args.records, db))
                print(results[-1])
            engine.dispose()
    report(results)


if __name__ == "__main__":
    main()
