"""A worker process the engine's fault tests kill: ``python killable_worker.py URL MODE``.

It serves the jobs domain's ``new`` stage (lease 30 s; 1 executor; ``[pipeline] prefetch`` 2)
until killed. ``MODE``: ``hang`` — every step blocks for ever (the test kills the process
while it holds a started claim and prefetched ones); ``crash`` — every step kills its own
process with SIGKILL at once (a record that kills its worker, D18).
"""

from __future__ import annotations

import os
import signal
import sys
import threading
from pathlib import Path

# Run as a script: the project root makes ``tests.support`` importable.
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from conveyor.clock import SystemClock
from conveyor.config import PipelineSettings
from conveyor.db.engine import make_engine
from conveyor.pipeline import StepContext, WorkerPool
from conveyor.pipeline.outcomes import Outcome
from tests.support.jobs_domain import make_domain

LEASE = {"hang": 30.0, "crash": 1.0}


def main() -> None:
    url, mode = sys.argv[1], sys.argv[2]

    def step(_ctx: StepContext) -> Outcome:
        if mode == "crash":
            os.kill(os.getpid(), signal.SIGKILL)
        threading.Event().wait()
        raise AssertionError("unreachable")

    domain = make_domain(step, waiting_lane="elsewhere", new_lease=LEASE[mode])
    settings = PipelineSettings(
        poll_interval=0.1, prefetch=2 if mode == "hang" else 0, max_attempts=2
    )
    pool = WorkerPool(
        make_engine(url), [domain], {"default": 1}, clock=SystemClock(), settings=settings
    )
    pool.start()
    print("ready", flush=True)
    threading.Event().wait()


if __name__ == "__main__":
    main()
