"""``Periodic``: the one way periodic chores (object and job-folder sweeps) run, fail and stop."""

from __future__ import annotations

import threading

import pytest

from conveyor.periodic import Periodic


def test_a_failing_run_is_logged_and_the_chore_runs_again(caplog: pytest.LogCaptureFixture) -> None:
    runs: list[int] = []
    again = threading.Event()

    def chore() -> None:
        runs.append(len(runs))
        if len(runs) == 1:
            raise RuntimeError("bucket unreachable")
        again.set()

    periodic = Periodic("test-chore", 0.01, chore)
    periodic.start()
    try:
        assert again.wait(10), "the chore did not run again after its failure"
    finally:
        periodic.stop()
    assert any(
        r.getMessage() == "test-chore failed" and r.exc_info is not None for r in caplog.records
    )


def test_false_ends_the_thread_and_stop_waits_for_a_run_under_way() -> None:
    ended = Periodic("test-ends", 0.01, lambda: False)
    ended.start()
    ended._thread.join(10)
    assert not ended._thread.is_alive()

    inside, release, finished = threading.Event(), threading.Event(), threading.Event()

    def slow() -> None:
        inside.set()
        release.wait(10)
        finished.set()

    periodic = Periodic("test-slow", 0.01, slow)
    periodic.start()
    assert inside.wait(10)
    threading.Timer(0.2, release.set).start()
    periodic.stop()
    assert finished.is_set(), "stop returned before the run under way finished"
