"""Time as Conveyor sees it: seconds since the Unix epoch, as a float.

Every time the engine stores (claim expiry, stage entry, retry pause) is such a number (P4 asks
for the expiry "written as a number"). Which clock writes it (D17): every time that decides who
may act is read from the *database's* clock inside the statement that acts, and the rows the
engine, an intake or a step writes are dated by it too; a worker's own clock
(:class:`SystemClock`) only decides how long to sleep. A test clock
(:class:`conveyor.testing.FakeClock`) sets ``drives_database_time`` and then stands in for the
database's clock, so tests move time without waiting.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta, timezone
from typing import Protocol

__all__ = ["Clock", "SystemClock", "iso_local", "iso_utc", "local_words", "seconds"]


class Clock(Protocol):
    """A source of the current time in epoch seconds."""

    @property
    def drives_database_time(self) -> bool:
        """True when the engine's statements must use this clock instead of the database's."""
        ...

    def now(self) -> float:
        """Return the current time, seconds since the epoch."""
        ...


class SystemClock:
    """This host's wall clock; the engine's statements read the database's clock instead."""

    drives_database_time = False

    def now(self) -> float:
        """Return ``time.time()``."""
        return time.time()


def iso_utc(epoch: float | None) -> str | None:
    """Epoch seconds → ISO 8601 UTC text to the second (``2026-11-29T19:32:00Z``); None stays."""
    if epoch is None:
        return None
    return datetime.fromtimestamp(epoch, UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


def iso_local(epoch: float | None, offset: int | None) -> str | None:
    """The local time of ``epoch`` in the zone ``offset`` minutes east of UTC, ISO 8601 with
    the offset (``2019-03-21T11:04:22-05:00``); None without a time or a zone."""
    if epoch is None or offset is None:
        return None
    zone = timezone(timedelta(minutes=offset))
    return datetime.fromtimestamp(epoch, zone).isoformat(timespec="seconds")


def local_words(epoch: float | None, offset: int | None) -> str | None:
    """A capture time as a person reads it: local time and zone, ``2019-03-21 11:04 UTC-05:00``;
    with the zone unknown, the stored wall time and ``(zone unknown)``; None without a time."""
    if epoch is None:
        return None
    if offset is None:
        when = datetime.fromtimestamp(epoch, UTC).strftime("%Y-%m-%d %H:%M")
        return f"{when} (zone unknown)"
    local = datetime.fromtimestamp(epoch, timezone(timedelta(minutes=offset)))
    sign = "-" if offset < 0 else "+"
    return f"{local:%Y-%m-%d %H:%M} UTC{sign}{abs(offset) // 60:02d}:{abs(offset) % 60:02d}"


def seconds(duration: float | None) -> float | None:
    """A duration for people and JSON: seconds rounded to the millisecond; None stays."""
    return None if duration is None else round(float(duration), 3)
