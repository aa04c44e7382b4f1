"""Test helpers shipped in the package: a clock that moves only when told to."""

from __future__ import annotations

import threading

__all__ = ["FakeClock"]


class FakeClock:
    """A :class:`conveyor.clock.Clock` whose time moves only by :meth:`advance` or :meth:`set`.

    Args:
        start: the initial time in epoch seconds.
    """

    def __init__(self, start: float = 1_800_000_000.0) -> None:
        self._now = start
        self._lock = threading.Lock()

    def now(self) -> float:
        """Return the current fake time in epoch seconds."""
        with self._lock:
            return self._now

    def advance(self, seconds: float) -> None:
        """Move time forward by ``seconds`` (may be fractional)."""
        with self._lock:
            self._now += seconds

    def set(self, when: float) -> None:
        """Jump to ``when`` (epoch seconds)."""
        with self._lock:
            self._now = when
