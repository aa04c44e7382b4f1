"""Where a record is, computed once for the pages and the CLI (P11, D6).

A record is in exactly one of these states, read from its queue columns at ``now`` (the
database's clock, D17): halted (P9), done (a terminal stage), worked on (an unexpired claim),
retrying (a retry time ahead: a failed attempt's pause, or a postpone when it has no failed
attempts, D6), or waiting for a worker.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from sqlalchemy import RowMapping

from conveyor.pipeline.stages import Declaration, Domain

__all__ = ["RecordState", "RecordStatus", "status_of"]


class RecordState(StrEnum):
    """The one state a record is in."""

    HALTED = "halted"
    DONE = "done"
    WORKING = "working"
    RETRYING = "retrying"
    WAITING = "waiting"


@dataclass(frozen=True, slots=True)
class RecordStatus:
    """A record's state at one instant.

    Attributes:
        state: which of the :class:`RecordState` it is in.
        stage: the stage it is at (or halted at, or done in).
        attempts: failed attempts in this stage; 0 for a postponed record (D6).
        retry_at: when it is claimable again (epoch seconds), for ``retrying`` only.
        terminal: the stage is a terminal one (also when the record is halted there).
    """

    state: RecordState
    stage: str
    attempts: int
    retry_at: float | None
    terminal: bool

    @property
    def postponed(self) -> bool:
        """Retrying after a postpone, not a failure (a provider busy, unreachable, working)."""
        return self.state is RecordState.RETRYING and not self.attempts


def _terminal(declaration: Declaration | Domain) -> list[str]:
    if isinstance(declaration, Domain):
        return declaration.terminal_stages
    return [declaration.stages[-1].name]  # a declaration's stages have no steps yet


def status_of(row: RowMapping, declaration: Declaration | Domain, now: float) -> RecordStatus:
    """The status of a record or item ``row`` of ``declaration``'s table at ``now`` (seconds).

    ``row`` needs the queue columns: ``stage``, ``halted_at``, ``claim_token``,
    ``claim_expires_at``, ``retry_at`` and ``attempts``.
    """
    stage = str(row["stage"])
    attempts = int(row["attempts"] or 0)
    expires, retry_at = row["claim_expires_at"], row["retry_at"]
    terminal = stage in _terminal(declaration)
    if row["halted_at"] is not None:
        state = RecordState.HALTED
    elif terminal:
        state = RecordState.DONE
    elif row["claim_token"] is not None and expires is not None and float(expires) > now:
        state = RecordState.WORKING
    elif retry_at is not None and float(retry_at) > now:
        return RecordStatus(RecordState.RETRYING, stage, attempts, float(retry_at), terminal)
    else:
        state = RecordState.WAITING
    return RecordStatus(state, stage, attempts, None, terminal)
