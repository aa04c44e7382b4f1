"""Time as the engine sees it: seconds since the Unix epoch, as a float.

Every time the engine stores (claim expiry, stage entry, retry pause) is such a number (P4 asks
for the expiry "written as a number"). Tests inject :class:`conveyor.testing.FakeClock`.
"""

from __future__ import annotations

import time
from typing import Protocol

__all__ = ["Clock", "SystemClock"]


class Clock(Protocol):
    """A source of the current time in epoch seconds."""

    def now(self) -> float:
        """Return the current time, seconds since the epoch."""
        ...


class SystemClock:
    """The wall clock."""

    def now(self) -> float:
        """Return ``time.time()``."""
        return time.time()
