"""Wake-ups: an idle worker wakes for new work and when a short retry pause ends."""

from __future__ import annotations

import threading
import time

from conveyor.db.notify import Notifier


def test_wait_times_out_without_a_wake_up() -> None:
    notifier = Notifier()
    assert notifier.wait(notifier.generation, 0.05) is False


def test_a_wake_up_between_looking_and_waiting_is_not_lost() -> None:
    notifier = Notifier()
    since = notifier.generation
    notifier.wake_local()  # arrives before the worker starts to wait
    assert notifier.wait(since, 10.0) is True


def test_a_scheduled_wake_up_ends_every_wait_early_and_only_once() -> None:
    notifier = Notifier()
    since = notifier.generation
    notifier.wake_after(0.05)
    results: list[bool] = []
    threads = [
        threading.Thread(target=lambda: results.append(notifier.wait(since, 30.0)))
        for _ in range(3)
    ]
    started = time.monotonic()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    assert results == [True, True, True]
    assert time.monotonic() - started < 29  # woken by the schedule, not by the timeout
    assert notifier.wait(notifier.generation, 0.05) is False  # consumed, not repeating
