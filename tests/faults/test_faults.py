"""The fault-injection suite: the engine's promise under the faults production brings (P1-P12, D17).

Each test runs three worker processes (lanes split across them) on a PostgreSQL cluster of
its own, over fast test jobs, real recordings, real photos and a video, injects one fault while
work is in flight, lets the run drain, and counts: no record lost, no write by a stale token
landed, no duplicate effect (texts, objects, journal and album events, provider operations),
every record ``done`` or halted with a reason (``harness.tally``). How long the system took to
recover is measured and printed in the suite's report.

The short versions run with the suite; ``pytest -m faults_long`` runs the long ones (2,000+
records, ten kills). See docs/operations.md.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine

from conveyor.db.engine import make_engine
from conveyor.db.migrate import upgrade
from conveyor.objects import ObjectStore
from tests.support.cluster import ThrowawayCluster
from tests.support.fault_harness import (
    THREE_WORKERS,
    Fleet,
    Seeded,
    WorkerSpec,
    done_records,
    held_claims,
    open_records,
    seed,
    storage_env,
    storage_of,
    taken_over,
    tally,
    wait_until,
)
from tests.support.fault_report import record
from tests.support.http_fault_proxy import HttpFaultProxy
from tests.support.s3server import S3Server
from tests.support.tcp_proxy import TcpProxy


@dataclass(frozen=True)
class Size:
    """How big a run is: fast jobs, recordings, photos (a video per ten photos)."""

    jobs: int
    audio: int
    photos: int


SHORT = Size(jobs=300, audio=4, photos=8)
LONG = Size(jobs=2000, audio=20, photos=40)
#: A whole run must drain within this many seconds (a generous bound on two loaded cores).
DRAIN_TIMEOUT = 600.0
#: pytest-timeout's bound for one long run (the suite's default is 600 s).
LONG_TIMEOUT = 3600


@dataclass
class Run:
    """One fault run: the database (direct, for counting), the proxy the workers go through,
    the workers, the store and what was seeded."""

    name: str
    cluster: ThrowawayCluster
    engine: Engine
    proxy: TcpProxy
    fleet: Fleet
    store: ObjectStore
    seeded: Seeded

    def in_flight(self, fraction: float = 0.15) -> None:
        """Wait until a share of the work is done: the fault then hits work in flight."""
        target = int(self.seeded.total * fraction)
        wait_until(lambda: done_records(self.engine) >= target, 300, what="work in flight")

    def progress_after(self, since: float) -> float:
        """Seconds from ``since`` (monotonic) until one more record is done than now, or until
        none is left open (a run that drained meanwhile has nothing more to show)."""
        seen: list[int] = []

        def moved() -> bool:
            # The first count read (the database may still be coming back) is the baseline.
            seen.append(done_records(self.engine))
            return seen[-1] > seen[0] or open_records(self.engine) == 0

        try:
            wait_until(moved, 300, every=0.05, what="progress")
        except AssertionError as exc:
            raise AssertionError(f"{exc}\n{self.fleet.logs()}") from None
        return time.monotonic() - since


@pytest.fixture
def make_run(cluster: ThrowawayCluster, tmp_path: Path) -> Iterator[Callable[..., Run]]:
    made: list[Run] = []

    def make(
        name: str,
        size: Size,
        specs: tuple[WorkerSpec, ...] = THREE_WORKERS,
        *,
        storage: dict[str, Any] | None = None,
        workers_storage: dict[str, Any] | None = None,
    ) -> Run:
        """``storage``: the ``[storage]`` keys (default a folder); ``workers_storage``: the
        workers' own when they differ (the same bucket through a fault proxy)."""
        database = f"faults_{name}"
        engine = make_engine(cluster.create_database(database), pool_size=5)
        upgrade(engine)
        proxy = TcpProxy(("127.0.0.1", cluster.port))
        keys: dict[str, Any] = storage or {"root": str(tmp_path / "storage")}
        store = storage_of(keys, tmp_path / "test-work")
        seeded = seed(engine, store, jobs_count=size.jobs, audio=size.audio, photos=size.photos)
        work = tmp_path / "work"
        work.mkdir()
        fleet = Fleet(
            cluster.url_of(database, proxy.port),
            storage_env(workers_storage or keys),
            work,
            specs,
        )
        run = Run(name, cluster, engine, proxy, fleet, store, seeded)
        made.append(run)
        fleet.start()
        return run

    yield make
    for run in made:
        run.fleet.stop()
        run.proxy.down()
        run.engine.dispose()


def finish(
    run: Run, summary: str, measured: dict[str, Any], *, expect_lost_claims: bool = True
) -> None:
    """Drain, stop the workers, count, report; fail on any broken promise."""
    started = time.monotonic()
    try:
        wait_until(
            lambda: open_records(run.engine) == 0, DRAIN_TIMEOUT, what="every record settled"
        )
    except AssertionError as exc:
        raise AssertionError(f"{exc}\n{run.fleet.logs()}") from None
    drain = time.monotonic() - started
    alive = run.fleet.alive()
    run.fleet.stop()
    result = tally(run.engine, run.store, run.seeded, run.fleet.provider_dir)
    lost = run.fleet.lost_claims()
    measured = {**measured, "stale_results_refused": lost}
    record(
        {
            "fault": run.name,
            "summary": summary,
            "measured": measured,
            "drain_seconds": drain,
            "tally": result.as_dict(),
        }
    )
    assert all(alive), f"a worker process died by itself: {alive}\n{run.fleet.logs()}"
    if not expect_lost_claims:
        assert lost == 0, f"{lost} claims lost without a kill or an outage\n{run.fleet.logs()}"
    assert not result.violations, "\n".join(result.violations)
    assert result.records == run.seeded.total
    # Nothing here is allowed to exhaust its attempts or get stuck: only bad input halts.
    assert set(result.halted) <= {"no_speech", "undecodable", "unsupported"}, result.halted


def kill_workers(run: Run, kills: int, seed_value: int = 8) -> None:
    rng = random.Random(seed_value)
    takeovers: list[float] = []
    for _ in range(kills):
        run.in_flight(0.05 + 0.8 * len(takeovers) / max(kills, 1) * 0.5)
        held = held_claims(run.engine)
        victim = rng.randrange(len(run.fleet.specs))
        killed_at = time.monotonic()
        run.fleet.kill(victim)
        run.fleet.restart(victim)
        # Every claim of the moment of the kill — the killed process's ones only expire after
        # their lease — finished or taken over.
        wait_until(partial(taken_over, run.engine, held), 120, what="claims taken over")
        takeovers.append(time.monotonic() - killed_at)
    finish(
        run,
        f"{kills} SIGKILLs of a random worker (restarted at once); claims of the moment taken "
        f"over within {max(takeovers):.1f} s at most (median "
        f"{sorted(takeovers)[len(takeovers) // 2]:.1f} s; leases 3 s / 6 s)",
        {"kills": kills, "takeover_seconds": takeovers},
    )


def restart_database(run: Run, down_for: float) -> None:
    run.in_flight()
    started = time.monotonic()
    run.cluster.restart(down_for=down_for)
    back = time.monotonic()
    recovered = run.progress_after(back)
    finish(
        run,
        f"PostgreSQL stopped as in a crash for {back - started:.1f} s and started again; the "
        f"first record was done {recovered:.1f} s after it was back",
        {"down_seconds": back - started, "recover_seconds": recovered},
    )


def cut_connections(run: Run, down_for: float) -> None:
    run.in_flight()
    run.proxy.cut()  # every open connection reset at once
    cut_recovered = run.progress_after(time.monotonic())
    run.in_flight(0.3)
    run.proxy.down()  # refused for a while
    time.sleep(down_for)
    run.proxy.up()
    back = time.monotonic()
    recovered = run.progress_after(back)
    finish(
        run,
        f"every database connection reset: progress again after {cut_recovered:.1f} s; "
        f"database unreachable for {down_for:.0f} s: progress {recovered:.1f} s after it was "
        "reachable again",
        {
            "reset_recover_seconds": cut_recovered,
            "refused_seconds": down_for,
            "recover_seconds": recovered,
        },
    )


def delay_connections(run: Run, delay: float, hold: float) -> None:
    run.in_flight()
    before = done_records(run.engine)
    time.sleep(hold)
    normal_rate = (done_records(run.engine) - before) / hold
    run.proxy.delay = delay
    before = done_records(run.engine)
    time.sleep(hold)
    slow_rate = (done_records(run.engine) - before) / hold
    run.proxy.delay = 0.0
    recovered = run.progress_after(time.monotonic())
    finish(
        run,
        f"every database packet delayed {delay * 1000:.0f} ms for {hold:.0f} s: "
        f"{slow_rate:.1f} records/s (vs {normal_rate:.1f} before); progress "
        f"{recovered:.1f} s after the delay ended",
        {"delay_seconds": delay, "normal_rate": normal_rate, "slow_rate": slow_rate},
    )


SKEWED = (
    WorkerSpec("audio,short", clock_offset=+300.0),
    WorkerSpec("short,long", clock_offset=-300.0),
    WorkerSpec("audio,long", clock_offset=0.0),
)


def skewed_clocks(run: Run) -> None:
    run.in_flight()
    finish(
        run,
        "worker clocks 5 minutes ahead, 5 minutes behind and right: no claim stolen, no pause "
        "skipped (decisions use the database's clock, D17)",
        {"offsets": [s.clock_offset for s in SKEWED]},
        # A worker deciding by its own clock would see live leases as expired (or its own as
        # valid too long) and claims would be taken from under running steps.
        expect_lost_claims=False,
    )


@dataclass
class FaultyBucket:
    """A fresh bucket on the S3 test server, and a fault proxy in front of it for the workers."""

    proxy: HttpFaultProxy
    direct: dict[str, Any]
    through_proxy: dict[str, Any]


@pytest.fixture
def faulty_bucket(s3_server: S3Server) -> Iterator[FaultyBucket]:
    proxy = HttpFaultProxy(s3_server.endpoint)
    direct = s3_server.storage_settings(s3_server.bucket(), "conveyor")
    yield FaultyBucket(proxy, direct, {**direct, "endpoint": proxy.endpoint})
    proxy.close()


def object_store_errors(run: Run, proxy: HttpFaultProxy, faulty_requests: int) -> None:
    """Store faults on the workers' first ``faulty_requests`` requests, then none.

    The proxy itself ends the faults at that count, fewer requests than the workload needs, so
    the end lands mid-run whatever the machine's speed. (A timed hold outlasted the whole run
    on a quiet machine: no record was left to show progress after it, and the wait for one
    stalled.) That work was left is proved by the requests that came after the faults.
    """
    # From the workers' start: the recordings and photos (the only steps that touch the
    # store) are few and quick beside the test jobs.
    proxy.error_rate, proxy.reset_rate, proxy.delay = 0.15, 0.1, 0.05
    proxy.heal_after(faulty_requests)
    # A request after the faults: work was left when they ended.
    wait_until(lambda: proxy.healed > 0, 300, what="a store request after the faults")
    errors, resets = proxy.counts["error"], proxy.counts["reset"]
    assert errors + resets > 0, proxy.counts
    finish(
        run,
        f"object store through a proxy, its first {faulty_requests} requests faulty: {errors} "
        f"answered 503, {resets} reset, every one 50 ms slow; then no faults "
        f"(the drain counts from the first request after them)",
        {"faulty_requests": faulty_requests, "errors": errors, "resets": resets},
    )


# --- the short versions (the suite, CI) --------------------------------------------------


def test_sigkill_of_a_random_worker_loses_and_repeats_nothing(make_run: Callable[..., Run]) -> None:
    kill_workers(make_run("sigkill", SHORT), kills=2)


def test_a_postgresql_restart_mid_run_loses_and_repeats_nothing(
    make_run: Callable[..., Run],
) -> None:
    restart_database(make_run("postgres_restart", SHORT), down_for=2.0)


def test_cut_database_connections_lose_and_repeat_nothing(make_run: Callable[..., Run]) -> None:
    cut_connections(make_run("connections_cut", SHORT), down_for=3.0)


def test_delayed_database_connections_lose_and_repeat_nothing(
    make_run: Callable[..., Run],
) -> None:
    delay_connections(make_run("connections_delayed", SHORT), delay=0.02, hold=3.0)


def test_worker_clocks_five_minutes_off_change_nothing(make_run: Callable[..., Run]) -> None:
    skewed_clocks(make_run("clock_skew", SHORT, SKEWED))


def test_object_store_errors_mid_run_lose_and_repeat_nothing(
    make_run: Callable[..., Run], faulty_bucket: FaultyBucket
) -> None:
    run = make_run(
        "object_store",
        Size(jobs=100, audio=6, photos=20),
        storage=faulty_bucket.direct,
        workers_storage=faulty_bucket.through_proxy,
    )
    object_store_errors(run, faulty_bucket.proxy, faulty_requests=40)


# --- the long versions (pytest -m faults_long) ---------------------------------------------


@pytest.mark.faults_long
@pytest.mark.timeout(LONG_TIMEOUT)
def test_long_ten_sigkills(make_run: Callable[..., Run]) -> None:
    kill_workers(make_run("long_sigkill", LONG), kills=10)


@pytest.mark.faults_long
@pytest.mark.timeout(LONG_TIMEOUT)
def test_long_postgresql_restart(make_run: Callable[..., Run]) -> None:
    restart_database(make_run("long_postgres_restart", LONG), down_for=10.0)


@pytest.mark.faults_long
@pytest.mark.timeout(LONG_TIMEOUT)
def test_long_cut_connections(make_run: Callable[..., Run]) -> None:
    cut_connections(make_run("long_connections_cut", LONG), down_for=15.0)


@pytest.mark.faults_long
@pytest.mark.timeout(LONG_TIMEOUT)
def test_long_delayed_connections(make_run: Callable[..., Run]) -> None:
    delay_connections(make_run("long_connections_delayed", LONG), delay=0.05, hold=15.0)


@pytest.mark.faults_long
@pytest.mark.timeout(LONG_TIMEOUT)
def test_long_skewed_clocks(make_run: Callable[..., Run]) -> None:
    skewed_clocks(make_run("long_clock_skew", LONG, SKEWED))


@pytest.mark.faults_long
@pytest.mark.timeout(LONG_TIMEOUT)
def test_long_object_store_errors(
    make_run: Callable[..., Run], faulty_bucket: FaultyBucket
) -> None:
    run = make_run(
        "long_object_store",
        LONG,
        storage=faulty_bucket.direct,
        workers_storage=faulty_bucket.through_proxy,
    )
    object_store_errors(run, faulty_bucket.proxy, faulty_requests=100)
