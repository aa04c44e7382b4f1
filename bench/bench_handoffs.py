"""Where a no-op record's time goes in the engine: the same drain taken apart, on SQLite.

Each case drains ``--records`` no-op records of ``bench_engine``'s domain, in a fresh process of
its own (so one case's threads and caches do not touch the next), and reports records per
second and CPU milliseconds per record (the whole process, every thread):

* ``floor``: ``bench_engine``'s floor, W threads each claiming one record per statement on the
  bare driver, then marking it done.
* ``pool``: one :class:`~conveyor.pipeline.WorkerPool` of W executors (producer → executors →
  completer, as a worker runs).
* ``pool on one CPU``: the same pool with the process bound to one CPU
  (``os.sched_setaffinity``): every hand-off between its threads then stays on one core.
* ``pool beside spinners``: the same pool while one low-priority busy loop per CPU keeps every
  core awake (a woken thread then never waits for an idle core to come out of its sleep).
* ``synchronous``: no threads: one loop of :meth:`~conveyor.pipeline.Executor.run_batch`,
  claims of W records, their steps and one save, through the engine's own statements and
  SQLAlchemy, as the pool does them but on one thread.
* ``hand-offs only``: the pool's hand-offs with no database at all: a producer queues W jobs
  under one lock and two conditions, W executors take one each and hand it to a completer,
  as :mod:`conveyor.pipeline.producer` and :mod:`conveyor.pipeline.completer` do.

The cases share the machine's load, so read them side by side; the ratio of ``pool`` to
``synchronous`` is what the threads cost, and ``hand-offs only`` what the shape costs before
any database work. Linux only (``sched_setaffinity``).

Run: ``.venv/bin/python bench/bench_handoffs.py [--records 5000] [--workers 4]``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from collections import deque
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
CASES = (
    "floor",
    "pool",
    "pool on one CPU",
    "pool beside spinners",
    "synchronous",
    "hand-offs only",
)


def _drain_pool(url: str, workers: int, records: int) -> dict[str, float]:
    from bench import bench_engine as be
    from conveyor.db.engine import make_engine

    engine = make_engine(url, pool_size=4)
    result = be.conveyor_threads(url, engine, workers, records, "sqlite")
    engine.dispose()
    return {"seconds": result.seconds, "cpu": result.cpu}


def _drain_synchronous(url: str, workers: int, records: int) -> dict[str, float]:
    from bench import bench_engine as be
    from conveyor.clock import SystemClock
    from conveyor.db.engine import make_engine
    from conveyor.pipeline import Executor

    engine = make_engine(url, pool_size=4)
    be.seed_jobs(engine, records)
    be._steps.update(count=0, target=records + 1)  # never "all ran": no one waits on it
    executor = Executor(engine, SystemClock(), be.bench_settings())
    domain = be.bench_domain()
    cpu, started = time.process_time(), time.perf_counter()
    done = 0
    with engine.connect() as conn:
        while claimed := executor.run_batch(conn, domain, be.LANE, limit=workers):
            done += claimed
    seconds, cpu = time.perf_counter() - started, time.process_time() - cpu
    engine.dispose()
    assert done == records, done
    return {"seconds": seconds, "cpu": cpu}


def _drain_floor(folder: Path, workers: int, records: int) -> dict[str, float]:
    import functools

    from bench import bench_engine as be

    connect = functools.partial(be._sqlite_connect, folder / "floor.db")
    result = be.floor(connect, workers, records, "sqlite", 1)
    return {"seconds": result.seconds, "cpu": result.cpu}


def _hand_offs(workers: int, records: int) -> dict[str, float]:
    """The producer → executors → completer hand-offs alone (see the module)."""
    lock = threading.Lock()
    work, freed = threading.Condition(lock), threading.Condition(lock)
    queued: deque[int] = deque()
    running = [0]
    finished: deque[int] = deque()
    saving = threading.Condition()
    saved = [0]
    all_saved = threading.Event()

    def produce() -> None:
        made = 0
        while made < records:
            with lock:
                idle = workers - running[0] - len(queued)
                if idle <= 0:
                    freed.wait()
                    continue
                count = min(idle, records - made)
                queued.extend(range(made, made + count))
                made += count
                work.notify(count)

    def execute() -> None:
        while True:
            with lock:
                while not queued:
                    work.wait()
                job = queued.popleft()
                running[0] += 1
            with saving:
                finished.append(job)
                saving.notify()
            with lock:
                running[0] -= 1
                freed.notify()

    def complete() -> None:
        while saved[0] < records:
            with saving:
                while not finished:
                    saving.wait()
                batch = len(finished)
                finished.clear()
            saved[0] += batch
        all_saved.set()

    for target in [execute] * workers + [complete]:
        threading.Thread(target=target, daemon=True).start()
    cpu, started = time.process_time(), time.perf_counter()
    threading.Thread(target=produce, daemon=True).start()
    all_saved.wait()
    return {"seconds": time.perf_counter() - started, "cpu": time.process_time() - cpu}


def _child(case: str, workers: int, records: int) -> None:
    """Run one case in this process and print its figures as JSON."""
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        url = f"sqlite:///{folder / 'bench.db'}"
        if case in ("pool", "pool on one CPU", "pool beside spinners", "synchronous"):
            from conveyor.db.engine import make_engine
            from conveyor.db.migrate import upgrade

            engine = make_engine(url)
            upgrade(engine)
            engine.dispose()
        if case == "pool on one CPU":
            os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})
        if case == "floor":
            figures = _drain_floor(folder, workers, records)
        elif case == "synchronous":
            figures = _drain_synchronous(url, workers, records)
        elif case == "hand-offs only":
            figures = _hand_offs(workers, records * 10)
            figures["records"] = records * 10
        else:
            figures = _drain_pool(url, workers, records)
    print(json.dumps(figures))


def _spinners() -> list[subprocess.Popen[bytes]]:
    """One lowest-priority busy loop per CPU: every core stays awake."""
    loop = "while True: pass"
    return [
        subprocess.Popen([sys.executable, "-c", f"import os; os.nice(19)\n{loop}"])
        for _ in range(os.cpu_count() or 1)
    ]


def _run(case: str, workers: int, records: int) -> dict[str, Any]:
    spinners = _spinners() if case == "pool beside spinners" else []
    try:
        time.sleep(0.2 if spinners else 0.0)
        command = [sys.executable, __file__, "--child", case, "--workers", str(workers)]
        out = subprocess.run(
            [*command, "--records", str(records)],
            check=True,
            capture_output=True,
            text=True,
            cwd=ROOT,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
        ).stdout
    finally:
        for spinner in spinners:
            spinner.kill()
            spinner.wait()
    figures: dict[str, Any] = json.loads(out.strip().splitlines()[-1])
    figures.setdefault("records", records)
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=5000)
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--repeat", type=int, default=2, help="rounds, cases interleaved")
    parser.add_argument("--child", choices=CASES, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        _child(args.child, args.workers, args.records)
        return
    print(f"load average at start: {os.getloadavg()[0]:.1f}, {os.cpu_count()} CPUs")
    best: dict[str, dict[str, Any]] = {}
    for _ in range(args.repeat):
        for case in CASES:
            figures = _run(case, args.workers, args.records)
            rate = figures["records"] / figures["seconds"]
            if case not in best or rate > best[case]["rate"]:
                best[case] = {**figures, "rate": rate}
    floor = best["floor"]["rate"]
    print(f"{f'case (SQLite, W={args.workers})':28} {'rec/s':>8} {'x floor':>8} {'CPU ms/rec':>11}")
    for case in CASES:
        row = best[case]
        cpu = row["cpu"] / row["records"] * 1000
        print(f"{case:28} {row['rate']:8.0f} {row['rate'] / floor:8.2f} {cpu:11.3f}")
    print(f"load average at the end: {os.getloadavg()[0]:.1f} (best of {args.repeat})")


if __name__ == "__main__":
    main()
