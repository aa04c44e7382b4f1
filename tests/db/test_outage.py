"""One outage, one pair of log lines: an outage ends only when the service has answered for
``settle`` seconds with no failure in between, never on one lucky connection. A fake clock and
the exact sequence a server's shutdown produces (failures, a connection that still gets
through, more failures), so nothing here depends on the timing of a real shutdown."""

from __future__ import annotations

import logging

import pytest
from sqlalchemy.exc import OperationalError

from conveyor.db.outage import Outage

REFUSED = OperationalError("SELECT 1", None, ConnectionRefusedError("connection refused"))


class FakeClock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def lines(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "test.outage"]


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def db(clock: FakeClock, caplog: pytest.LogCaptureFixture) -> Outage:
    caplog.set_level(logging.INFO, logger="test.outage")
    return Outage(logger=logging.getLogger("test.outage"), settle=1.0, clock=clock)


def test_a_lucky_connection_during_shutdown_does_not_end_the_outage(
    db: Outage, clock: FakeClock, caplog: pytest.LogCaptureFixture
) -> None:
    assert db.failed(REFUSED, "API")
    clock.now += 0.01
    db.succeeded()  # a pooled connection that still got through while the server stopped
    clock.now += 0.01
    assert db.failed(REFUSED, "wake-up listener")  # the listener's reconnect: same outage
    for _ in range(30):
        clock.now += 0.1
        assert db.failed(REFUSED, "worker")
        assert db.down
    clock.now += 5
    db.succeeded()  # back: recovery starts
    assert db.down
    clock.now += 0.5
    db.succeeded()
    assert db.down, "half the settle time is not yet the end"
    clock.now += 0.5
    db.succeeded()
    assert not db.down
    said = lines(caplog)
    assert len(said) == 2, said
    assert said[0].startswith("database unreachable (first met by the API)")
    # The outage lasted from its first failure to the start of the recovery.
    assert said[1] == "database reachable again after 8.0 s (32 failed attempts meanwhile)"


def test_a_failure_during_recovery_continues_the_outage_unlogged(
    db: Outage, clock: FakeClock, caplog: pytest.LogCaptureFixture
) -> None:
    db.failed(REFUSED, "API")
    for _ in range(5):
        clock.now += 0.3
        db.succeeded()
        clock.now += 0.3
        db.failed(REFUSED, "API")
    assert db.down
    assert len(lines(caplog)) == 1


def test_a_failure_long_after_the_service_came_back_is_a_new_outage(
    db: Outage, clock: FakeClock, caplog: pytest.LogCaptureFixture
) -> None:
    db.failed(REFUSED, "API")
    clock.now += 2
    db.succeeded()  # the only success before a quiet hour (an API with no requests)
    clock.now += 3600
    db.failed(REFUSED, "API")
    said = lines(caplog)
    assert [s.split(" (")[0].split(" after")[0] for s in said] == [
        "database unreachable",
        "database reachable again",
        "database unreachable",
    ]
    assert "after 2.0 s" in said[1]


def test_other_errors_are_not_outages(db: Outage, caplog: pytest.LogCaptureFixture) -> None:
    assert not db.failed(ValueError("bad statement"), "API")
    assert not db.down
    assert lines(caplog) == []
