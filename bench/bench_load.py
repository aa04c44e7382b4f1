"""The engine under a realistic load: real step times, two lanes, a heartbeat stage, a kill.

Every record passes two stages: ``a`` in the ``fast`` lane, then ``b`` in the ``slow`` lane
(a heartbeat stage, as normalizing and transcoding are). Each step's time is drawn once per
record and stage from a log-uniform spread between 1 ms and 5 s (seeded: every case gets the
same work), and the step waits that long. Cases, on SQLite and (with ``--postgres URL``)
PostgreSQL:

* ``threads``: one pool, 2 executors per lane (4 workers);
* ``processes``: 2 processes, each a pool with 1 executor per lane (4 workers).

It prints, per case:

* **repeats**: step runs beyond one per record and stage (must be 0: no fault is injected);
* **wait p50 / p99**: from the moment a record could run (eligible: inserted, or its previous
  stage saved; and its executor free since its last step ended) to its step's start, ms;
* **drain ÷ ideal**: wall time from start to the last record done, over the ideal (the busier
  lane's step seconds ÷ its 2 workers); and over the drain of a perfect schedule (the same claim
  order, no overhead: stage b of a record cannot start before its stage a ends, so with a few
  5 s steps the last ones run alone).

And the kill case (``--kill``): a worker process with ``[pipeline] prefetch = 2`` and short
leases runs beside a pool of this process; once it has started steps and holds prefetched
claims, it is killed with SIGKILL; printed are the seconds from the kill until each of its
unstarted records and each of its started records runs again elsewhere (targets: unstarted
≤ 2 s; started within the lease plus one poll and the retry pause, D18).

Run: ``.venv/bin/python bench/bench_load.py [--records 100] [--postgres postgresql://…]
[--kill]``. The PostgreSQL database is used as given: the engine schema is migrated there and
the tables ``bench_load`` and ``bench_load_runs`` are dropped and re-created.
"""

from __future__ import annotations

import argparse
import math
import multiprocessing
import os
import random
import signal
import statistics
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sqlalchemy import (
    Column,
    Double,
    Engine,
    Integer,
    MetaData,
    String,
    Table,
    insert,
    select,
    text,
)

from conveyor.clock import SystemClock
from conveyor.config import PipelineSettings
from conveyor.db.engine import make_engine
from conveyor.db.migrate import upgrade
from conveyor.db.tables import queue_columns, queue_indexes, record_events
from conveyor.pipeline import Advance, Domain, Stage, StepContext, WorkerPool
from conveyor.pipeline.outcomes import Outcome

load_metadata = MetaData()
bench_load = Table(
    "bench_load",
    load_metadata,
    Column("id", Integer, primary_key=True),
    Column("sort_value", Double, nullable=False),
    Column("seconds_a", Double, nullable=False),
    Column("seconds_b", Double, nullable=False),
    Column("inserted_at", Double, nullable=False),
    *queue_columns(),
)
# The engine's indexes every record table has (claim order, begun records, running steps).
queue_indexes(bench_load, bench_load.c.sort_value)
_open = (bench_load.c.halted_at.is_(None)) & (bench_load.c.stage != "done")
# One row per step run: which executor ran which record's stage, and when (wall clock).
bench_load_runs = Table(
    "bench_load_runs",
    load_metadata,
    Column("id", Integer, primary_key=True),
    Column("record_id", Integer, nullable=False),
    Column("stage", String(8), nullable=False),
    Column("executor", String(64), nullable=False),
    Column("started", Double, nullable=False),
    Column("ended", Double, nullable=True),
)

LANES = {"fast": "a", "slow": "b"}
SHORTEST, LONGEST = 0.001, 5.0


def step(ctx: StepContext) -> Outcome:
    """Wait the record's drawn time for this stage; note the run (start and end)."""
    started = time.time()
    executor = f"{os.getpid()}:{threading.current_thread().name}"
    with ctx.engine.begin() as conn:
        run_id = conn.execute(
            insert(bench_load_runs)
            .values(
                record_id=ctx.claim.record_id,
                stage=ctx.stage.name,
                executor=executor,
                started=started,
            )
            .returning(bench_load_runs.c.id)
        ).scalar_one()
    seconds = float(ctx.record[f"seconds_{ctx.stage.name}"])
    deadline = time.monotonic() + seconds
    while (left := deadline - time.monotonic()) > 0:
        time.sleep(min(left, 0.5))
        ctx.check()
    with ctx.engine.begin() as conn:
        conn.execute(
            bench_load_runs.update().where(bench_load_runs.c.id == run_id).values(ended=time.time())
        )
    return Advance()


def load_domain(lease: float = 60.0) -> Domain:
    return Domain(
        name="load",
        table=bench_load,
        stages=[
            Stage("a", step, lane="fast", lease=lease),
            Stage("b", step, lane="slow", lease=lease, heartbeat=True),
            Stage("done"),
        ],
        order_by=[bench_load.c.sort_value],
        owned_fields=frozenset(),
    )


def draw(records: int, seed: int = 18) -> list[tuple[float, float]]:
    """Step seconds per record for stages a and b: log-uniform over [1 ms, 5 s]."""
    rng = random.Random(seed)
    low, high = math.log(SHORTEST), math.log(LONGEST)
    return [
        (math.exp(rng.uniform(low, high)), math.exp(rng.uniform(low, high))) for _ in range(records)
    ]


def seed(engine: Engine, work: list[tuple[float, float]]) -> float:
    load_metadata.drop_all(engine)
    load_metadata.create_all(engine)
    now = time.time()
    with engine.begin() as conn:
        conn.execute(text("DELETE FROM record_events WHERE domain = 'load'"))
    if work:
        now = _insert_all(engine, work)
    if engine.dialect.name == "postgresql":
        with engine.begin() as conn:
            conn.execute(text("ANALYZE bench_load"))
    return now


def settings(prefetch: int = 0) -> PipelineSettings:
    return PipelineSettings(
        poll_interval=2.0, stop_grace=10.0, retry_base=1.0, retry_max=2.0, prefetch=prefetch
    )


def open_count(engine: Engine) -> int:
    with engine.connect() as conn:
        return len(conn.execute(select(bench_load.c.id).where(_open)).all())


@dataclass
class LoadResult:
    database: str
    case: str
    repeats: int
    wait_p50: float
    wait_p99: float
    drain: float
    ideal: float


def analyse(engine: Engine, database: str, case: str, began: float, drain: float) -> LoadResult:
    with engine.connect() as conn:
        runs = conn.execute(
            select(
                bench_load_runs.c.record_id,
                bench_load_runs.c.stage,
                bench_load_runs.c.executor,
                bench_load_runs.c.started,
                bench_load_runs.c.ended,
            ).order_by(bench_load_runs.c.started)
        ).all()
        saved = {
            int(r[0]): float(r[1])
            for r in conn.execute(
                select(record_events.c.record_id, record_events.c.created_at).where(
                    record_events.c.domain == "load",
                    record_events.c.stage == "a",
                    record_events.c.outcome == "advanced",
                )
            ).all()
        }
        work = conn.execute(select(bench_load.c.seconds_a, bench_load.c.seconds_b)).all()
    seen: dict[tuple[int, str], int] = {}
    free_since: dict[str, float] = {}
    waits: list[float] = []
    for record_id, stage, executor, started, ended in runs:
        seen[(record_id, stage)] = seen.get((record_id, stage), 0) + 1
        eligible = began if stage == "a" else saved.get(record_id, started)
        ready = max(eligible, free_since.get(executor, began))
        waits.append(max(0.0, started - ready))
        free_since[executor] = ended if ended is not None else started
    repeats = sum(n - 1 for n in seen.values())
    ideal = max(sum(w[0] for w in work), sum(w[1] for w in work)) / 2
    waits.sort()
    p99 = waits[min(len(waits) - 1, int(len(waits) * 0.99))]
    return LoadResult(
        database, case, repeats, statistics.median(waits) * 1000, p99 * 1000, drain, ideal
    )


def schedule(work: list[tuple[float, float]], workers: int = 2) -> float:
    """The drain of a perfect engine with no overhead: each lane's ``workers`` take records in
    claim order the moment they are free and eligible (stage b once its stage a is done)."""
    free_a = [0.0] * workers
    done_a = []
    for a, _b in work:
        slot = min(range(workers), key=free_a.__getitem__)
        free_a[slot] += a
        done_a.append(free_a[slot])
    free_b = [0.0] * workers
    waiting = sorted(range(len(work)), key=lambda i: done_a[i])
    end = 0.0
    for i in waiting:
        slot = min(range(workers), key=free_b.__getitem__)
        free_b[slot] = max(free_b[slot], done_a[i]) + work[i][1]
        end = max(end, free_b[slot])
    return end


def lower_bound(work: list[tuple[float, float]], workers: int = 2) -> float:
    """A drain no engine can beat, whatever order it takes records in: the ideal (the busier
    lane's work ÷ its workers), each lane's work after the other lane's shortest step (lane b
    has nothing before some stage a ends; after lane a's last step some stage b remains), and
    the longest record (its a, then its b)."""
    sum_a, sum_b = sum(w[0] for w in work), sum(w[1] for w in work)
    return max(
        sum_a / workers + min(w[1] for w in work),
        sum_b / workers + min(w[0] for w in work),
        max(a + b for a, b in work),
    )


def run_threads(url: str, engine: Engine, work: list[tuple[float, float]], db: str) -> LoadResult:
    began = seed(engine, work)
    pool = WorkerPool(
        engine, [load_domain()], {"fast": 2, "slow": 2}, clock=SystemClock(), settings=settings()
    )
    pool.start()
    while open_count(engine):
        time.sleep(0.02)
    drain = time.time() - began
    pool.stop()
    return analyse(engine, db, "threads (2 per lane)", began, drain)


def _worker(url: str, lanes: dict[str, int], prefetch: int, lease: float, ready: Any) -> None:
    engine = make_engine(url, pool_size=8)
    pool = WorkerPool(
        engine, [load_domain(lease)], lanes, clock=SystemClock(), settings=settings(prefetch)
    )
    engine.connect().close()
    ready.wait()
    pool.start()
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    stop.wait()
    pool.stop()


def run_processes(url: str, engine: Engine, work: list[tuple[float, float]], db: str) -> LoadResult:
    ctx = multiprocessing.get_context("spawn")
    ready = ctx.Barrier(3)
    seed(engine, [])  # the tables exist before the workers start
    procs = [
        ctx.Process(target=_worker, args=(url, {"fast": 1, "slow": 1}, 0, 60.0, ready))
        for _ in range(2)
    ]
    for proc in procs:
        proc.start()
    _insert_all(engine, work)
    # The clock starts once every worker is ready: spawning and importing is start-up.
    ready.wait()
    began = time.time()
    while open_count(engine):
        time.sleep(0.02)
    drain = time.time() - began
    for proc in procs:
        proc.terminate()
        proc.join()
    return analyse(engine, db, "processes (2 × 1 per lane)", began, drain)


def _insert_all(engine: Engine, work: list[tuple[float, float]]) -> float:
    now = time.time()
    with engine.begin() as conn:
        conn.execute(
            insert(bench_load),
            [
                {
                    "sort_value": float(i),
                    "seconds_a": a,
                    "seconds_b": b,
                    "inserted_at": now,
                    "stage": "a",
                    "state_entered_at": now,
                    "attempts": 0,
                    "updated_at": now,
                }
                for i, (a, b) in enumerate(work)
            ],
        )
    return now


def run_kill(url: str, engine: Engine, db: str, lease: float) -> tuple[list[float], list[float]]:
    """Kill a worker process holding started and prefetched claims; seconds until each runs
    again elsewhere: (unstarted, started)."""
    work = [(1.5, 1.5)] * 4  # all claimed by the victim: the survivor is idle when they lapse
    seed(engine, [])
    ctx = multiprocessing.get_context("spawn")
    ready = ctx.Barrier(2)
    victim = ctx.Process(target=_worker, args=(url, {"fast": 2, "slow": 1}, 2, lease, ready))
    victim.start()
    ready.wait()
    _insert_all(engine, work)
    # Wait until it has started steps and holds prefetched claims.
    deadline = time.time() + 60
    while time.time() < deadline:
        with engine.connect() as conn:
            rows = conn.execute(
                select(bench_load.c.id, bench_load.c.step_started_at).where(
                    bench_load.c.claim_token.is_not(None)
                )
            ).all()
        unstarted = [int(r[0]) for r in rows if r[1] is None]
        started = [int(r[0]) for r in rows if r[1] is not None]
        if len(unstarted) >= 2 and len(started) >= 2:
            break
        time.sleep(0.01)
    assert victim.pid is not None
    os.kill(victim.pid, signal.SIGKILL)
    killed = time.time()
    victim.join()
    # The survivor: a pool of this process (default poll, prefetch 0).
    survivor = WorkerPool(
        engine,
        [load_domain(lease)],
        {"fast": 2, "slow": 2},
        clock=SystemClock(),
        settings=settings(),
    )
    survivor.start()
    wanted = set(unstarted) | set(started)
    again: dict[int, float] = {}
    deadline = time.time() + lease + 30
    while not wanted <= set(again) and time.time() < deadline:
        with engine.connect() as conn:
            for record_id, begun in conn.execute(
                select(bench_load_runs.c.record_id, bench_load_runs.c.started).where(
                    bench_load_runs.c.started > killed
                )
            ).all():
                again.setdefault(int(record_id), float(begun) - killed)
        time.sleep(0.02)
    survivor.stop()
    return [again.get(i, math.inf) for i in unstarted], [again.get(i, math.inf) for i in started]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    # 100: with 40 records the claim order's last long steps run alone (a perfect schedule in
    # that order is 1.21× the ideal); from 100 on it is within 1.03×.
    parser.add_argument("--records", type=int, default=100)
    parser.add_argument("--postgres", help="a PostgreSQL URL; SQLite only without it")
    parser.add_argument("--kill", action="store_true", help="also the SIGKILL case")
    parser.add_argument("--lease", type=float, default=5.0, help="lease of the kill case")
    parser.add_argument("--only", choices=["threads", "processes"])
    args = parser.parse_args()
    work = draw(args.records)
    perfect = schedule(work)
    ideal = max(sum(w[0] for w in work), sum(w[1] for w in work)) / 2
    print(
        f"{args.records} records × 2 stages, step seconds log-uniform 1 ms – 5 s: "
        f"lane a {sum(w[0] for w in work):.1f} s, lane b {sum(w[1] for w in work):.1f} s of work"
    )
    # What the ideal can be measured against: the bound no order beats, and the best drain in
    # the claim order the engine must keep (P5), which with few records ends in a tail of long
    # steps run alone.
    print(
        f"ideal {ideal:.1f} s; lower bound in any order {lower_bound(work):.1f} s "
        f"({lower_bound(work) / ideal:.2f}×); perfect schedule in claim order {perfect:.1f} s "
        f"({perfect / ideal:.2f}×)"
    )
    print(f"load average before: {os.getloadavg()}")
    databases: list[tuple[str, str]] = []
    folder = Path(tempfile.mkdtemp(prefix="conveyor-bench-load-"))
    databases.append(("sqlite", f"sqlite:///{folder / 'load.db'}"))
    if args.postgres:
        databases.append(("postgresql", args.postgres))
    for db, url in databases:
        engine = make_engine(url, pool_size=12)
        upgrade(engine)
        results = []
        if args.only in (None, "threads"):
            results.append(run_threads(url, engine, work, db))
        if args.only in (None, "processes"):
            results.append(run_processes(url, engine, work, db))
        for r in results:
            print(
                f"{r.database:10} {r.case:28} repeats {r.repeats}  wait p50 {r.wait_p50:7.1f} ms"
                f"  p99 {r.wait_p99:7.1f} ms  drain {r.drain:6.1f} s  ideal {r.ideal:6.1f} s"
                f"  ratio {r.drain / r.ideal:5.2f}  (÷ a perfect schedule {perfect:5.1f} s: "
                f"{r.drain / perfect:5.2f})"
            )
        if args.kill:
            unstarted, started = run_kill(url, engine, db, args.lease)
            print(
                f"{db:10} kill -9 (lease {args.lease:.0f} s, prefetch 2): unstarted records "
                f"ran again after {', '.join(f'{s:.2f}' for s in sorted(unstarted))} s; started "
                f"after {', '.join(f'{s:.2f}' for s in sorted(started))} s"
            )
        engine.dispose()
    print(f"load average after: {os.getloadavg()}")


if __name__ == "__main__":
    main()
