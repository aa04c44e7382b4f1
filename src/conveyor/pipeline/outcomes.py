"""What a step returns. The executor turns each into one conditional write (P6).

Who moves a record:

* :class:`Advance` moves it to the next stage (or a named later one) with the fields the step
  owns, and resets the watchdogs for the new stage.
* :class:`Postpone` releases the claim with a retry pause; stage, ``state_entered_at`` stay,
  ``attempts`` resets (D6: waiting on foreign work is not a failure); journaled only with a
  ``note`` (a wait that begins for a new reason).
* :class:`Fail` counts a failure and pauses with jittered exponential back-off; at
  ``max_attempts`` the record is halted ``attempts_exhausted``.
* :class:`Halt` takes the record out of selection with a reason (P8, P10).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import Connection

from conveyor.halts import HaltReason

__all__ = ["Advance", "Fail", "Halt", "Outcome", "Postpone", "Writes"]

Writes = Callable[[Connection], Mapping[str, Any] | None]
"""Extra writes run in the same transaction as the step's save, only while the claim holds.

They receive the open connection and may return more record fields to set (e.g. the id of a
file row they inserted). If the claim turns out lost, the whole transaction is rolled back.
"""


@dataclass(frozen=True)
class Advance:
    """Move to the next stage (or ``to``), writing ``fields`` (all pipeline-owned, P7)."""

    fields: Mapping[str, Any] = field(default_factory=dict)
    to: str | None = None
    writes: Writes | None = None
    note: str | None = None


@dataclass(frozen=True)
class Postpone:
    """Come back after ``delay`` seconds; not a failure (D6).

    A postpone writes no journal row, except with ``note``: the step sets it when the wait
    begins for a new reason (the first refusal of a provider that is busy or unreachable), so
    the history says why the record waits without a row per try.
    """

    delay: float
    fields: Mapping[str, Any] = field(default_factory=dict)
    writes: Writes | None = None
    note: str | None = None


@dataclass(frozen=True)
class Fail:
    """The step failed in a way worth retrying; ``error`` is the readable cause."""

    error: str


@dataclass(frozen=True)
class Halt:
    """Stop selecting this record until a human resumes it (P8).

    Args:
        reason: the reason, declared by its owner (``EngineHalt.STUCK``,
            ``AudioHalt.UNDECODABLE`` ...: :mod:`conveyor.halts`).
        error: the text a person reads on the record card.
    """

    reason: HaltReason
    error: str
    writes: Writes | None = None


Outcome = Advance | Postpone | Fail | Halt
