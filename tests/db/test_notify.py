"""Wake-ups: an idle worker wakes for new work (announced in the transaction that makes it)
and when a short retry pause ends."""

from __future__ import annotations

import threading
import time

import pytest
from sqlalchemy import Engine, text

from conveyor.db.album_signals import AlbumSignals, notify_album
from conveyor.db.engine import make_engine
from conveyor.db.notify import Notifier, announce_work


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


def test_announced_work_wakes_this_process_after_the_commit_and_never_on_rollback(
    engine: Engine,
) -> None:
    """Intake and resume say ``announce_work`` in their transaction and publish nothing else:
    the notifiers of the engine wake once the work is committed, not before, not on rollback."""
    notifier = Notifier(engine)
    since = notifier.generation
    with engine.begin() as conn:
        announce_work(conn)
        assert notifier.generation == since  # not yet visible to a woken worker
    assert notifier.generation == since + 1

    since = notifier.generation
    with pytest.raises(RuntimeError), engine.begin() as conn:
        announce_work(conn)
        raise RuntimeError("the intake failed")
    with engine.begin() as conn:  # the same pooled connection, nothing announced
        conn.execute(text("SELECT 1"))
    assert notifier.generation == since


def test_every_notifier_of_the_engine_hears_announced_work(engine: Engine) -> None:
    pool_side, web_side = Notifier(engine), Notifier(engine)
    before = (pool_side.generation, web_side.generation)
    with engine.begin() as conn:
        announce_work(conn)
    assert (pool_side.generation, web_side.generation) == (before[0] + 1, before[1] + 1)


def test_one_listen_connection_hears_both_wake_up_kinds(pg_engine: Engine) -> None:
    """PostgreSQL: the pool's wake-ups and the album events share the process's one LISTEN
    connection, and each hears only its own channel."""
    # A process of its own name, so that only its LISTEN connections are counted.
    url = pg_engine.url.update_query_dict({"application_name": "conveyor_one_listener"})
    engine = make_engine(url.render_as_string(hide_password=False), pool_size=2)
    notifier, signals = Notifier(engine), AlbumSignals(engine)
    notifier.start_listening()
    signals.start()
    try:
        deadline = time.monotonic() + 30
        while not (signals.listening and notifier.connections):
            assert time.monotonic() < deadline, "the listener never listened"
            time.sleep(0.05)
        since, album = notifier.generation, signals.generation(41)
        with pg_engine.begin() as conn:
            notify_album(conn, 41)
        while signals.generation(41) == album:
            assert time.monotonic() < deadline, "the album event was not heard"
            time.sleep(0.05)
        assert notifier.generation == since  # an album event is no work
        with pg_engine.connect() as conn:
            listening = conn.execute(
                text(
                    "SELECT count(*) FROM pg_stat_activity WHERE query LIKE 'LISTEN %'"
                    " AND application_name = 'conveyor_one_listener'"
                )
            ).scalar_one()
        assert listening == 1
        with pg_engine.begin() as conn:  # another process's hand-off, as PostgreSQL tells it
            conn.execute(text("SELECT pg_notify('conveyor_work', '')"))
        assert notifier.wait(since, 30)
    finally:
        signals.close()
        notifier.close()
        engine.dispose()
