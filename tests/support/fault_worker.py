"""A worker process for the fault suite: ``conveyor worker`` plus the fast test domain.

Run as a script (``python tests/support/fault_worker.py --lanes short,long``). It builds the same
:class:`~conveyor.runtime.Runtime` as ``conveyor worker`` from the ``CONVEYOR_*`` settings
(database, storage, lanes' worker counts), serves the audio and media domains and the fast
``jobs`` test domain (``tests/support/jobs_domain.py``) in the lanes it is given, and runs
until SIGTERM. Test-only knobs, as options:

- ``--clock-offset SECONDS``: this process's own clock runs that far off (a worker host whose
  clock is wrong; the engine's decisions still use the database's clock, D17).
- ``--provider-dir DIR``: recognise with :class:`SharedFakeProvider` in ``DIR`` instead of
  the configured provider.
"""

from __future__ import annotations

import argparse
import logging
import random
import signal
import sys
import threading
import time
from dataclasses import replace
from pathlib import Path

# Run as a script from a scratch folder: the project root makes ``tests.support`` importable.
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from sqlalchemy import Connection, insert

from conveyor.clock import Clock, SystemClock
from conveyor.config import load_settings
from conveyor.pipeline import Advance, Domain, Fail, StepContext, WorkerPool
from conveyor.pipeline.outcomes import Outcome
from conveyor.runtime import Runtime
from conveyor.testing import OffsetClock
from tests.support.jobs_domain import effects, make_domain
from tests.support.shared_provider import SharedFakeProvider

#: The lanes of the jobs domain's two stages: a job hands off from ``short`` to ``long``.
JOBS_LANES = ("short", "long")


def jobs_domain(step_seconds: float, fail_rate: float, lease: float) -> Domain:
    """The fast test domain: each step works ``step_seconds`` (± half), fails at
    ``fail_rate``, and writes one effect row (job, stage, token) in its fenced save."""
    rng = random.Random()
    lock = threading.Lock()

    def step(ctx: StepContext) -> Outcome:
        with lock:
            dice, jitter = rng.random(), rng.uniform(0.5, 1.5)
        time.sleep(step_seconds * jitter)
        if dice < fail_rate:
            return Fail("injected failure")

        def effect(conn: Connection) -> None:
            conn.execute(
                insert(effects).values(
                    job_id=ctx.claim.record_id, stage=ctx.stage.name, token=ctx.claim.token
                )
            )

        # The saved result names the claim: with the effect it proves both came from one holder.
        return Advance({"result": ctx.claim.token}, writes=effect)

    return make_domain(
        step,
        step,
        new_lane=JOBS_LANES[0],
        waiting_lane=JOBS_LANES[1],
        new_lease=lease,
        waiting_lease=lease,
        heartbeat=True,
    )


def shorten_leases(domain: Domain, lease: float) -> Domain:
    """``domain`` with no lease longer than ``lease`` seconds: a killed worker's records are
    taken over within seconds, so a test can wait for it (production leases are minutes)."""
    stages = [s if s.step is None else replace(s, lease=min(s.lease, lease)) for s in domain.stages]
    return replace(domain, stages=stages)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--lanes", default="audio,short,long")
    parser.add_argument("--clock-offset", type=float, default=0.0)
    parser.add_argument("--provider-dir", type=Path)
    parser.add_argument("--step-seconds", type=float, default=0.02)
    parser.add_argument("--fail-rate", type=float, default=0.02)
    parser.add_argument("--lease", type=float, default=3.0)
    parser.add_argument("--real-lease", type=float, default=6.0)
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(levelname)s %(message)s")

    settings = load_settings()
    clock: Clock = OffsetClock(args.clock_offset) if args.clock_offset else SystemClock()
    provider = SharedFakeProvider(args.provider_dir) if args.provider_dir else None
    runtime = Runtime(settings, clock, provider=provider)
    counts = runtime.lanes([lane for lane in args.lanes.split(",") if lane])
    domains = [
        *(shorten_leases(d, args.real_lease) for d in runtime.domains()),
        jobs_domain(args.step_seconds, args.fail_rate, args.lease),
    ]
    pool = WorkerPool(
        runtime.engine,
        domains,
        counts,
        clock=clock,
        settings=settings.pipeline,
        notifier=runtime.notifier,
    )
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    pool.start()
    sweeper = runtime.sweeper()
    sweeper.start()
    print("fault worker ready", flush=True)
    stop.wait()
    sweeper.stop()
    pool.stop()


if __name__ == "__main__":
    main()
