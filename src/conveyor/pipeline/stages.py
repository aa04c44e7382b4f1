"""Stage descriptors: each stage is declared once; everything else derives from it (D11).

A :class:`Domain` lists its stages in order. From that one list the engine derives the claim
filter of each lane (its non-terminal stages), the lease written at claim time (P4), the
dispatch table (stage → step), the next stage of an :class:`~conveyor.pipeline.Advance`, and
which time limit the stuck watchdog applies (own or foreign work, D3).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

from sqlalchemy import ColumnElement, Table

from conveyor.errors import DeclarationError

if TYPE_CHECKING:
    from conveyor.pipeline.executor import StepContext
    from conveyor.pipeline.outcomes import Outcome

__all__ = ["Domain", "Stage", "Step", "Work"]

Work = Literal["own", "foreign"]
Step = Callable[["StepContext"], "Outcome"]


@dataclass(frozen=True)
class Stage:
    """One stage of a domain.

    Args:
        name: the stage's name, stored in the record's ``stage`` column.
        step: the step that moves a record out of this stage; None only for terminal stages.
        lane: the lane whose workers run this step (M7, M8).
        work: ``own`` (our computation) or ``foreign`` (waiting on a provider), which picks the
            stuck limit ``own_work_limit`` or ``foreign_work_limit`` (D3).
        lease: claim length in seconds, written as ``now + lease`` at claim time (P4).
        heartbeat: the executor extends the lease every ``lease / 3`` seconds while the step
            runs (long steps, M8).
    """

    name: str
    step: Step | None = None
    lane: str = "default"
    work: Work = "own"
    lease: float = 300.0
    heartbeat: bool = False

    @property
    def terminal(self) -> bool:
        """True for a stage no step leaves (e.g. ``done``)."""
        return self.step is None


@dataclass(frozen=True)
class Domain:
    """A record table and its ordered stages.

    Args:
        name: short name used in events and metrics (``audio``, ``media``).
        table: the record table; it must carry :func:`conveyor.db.tables.queue_columns`.
        stages: every stage in order; an Advance without ``to`` goes to the next one.
        order_by: the claim sort value(s); the primary key is appended as tie-break (P5).
        owned_fields: the only columns steps may write (P7); queue columns are the engine's.
        noun: what people call one row in logs and messages (``record 7``, ``item 7``).

    Raises:
        DeclarationError: duplicate stage names, a non-terminal stage without a step, a
            terminal stage with one, or no stages at all (start-up fails, D11).
    """

    name: str
    table: Table
    stages: Sequence[Stage]
    order_by: Sequence[ColumnElement[object]]
    owned_fields: frozenset[str]
    noun: str = "record"
    _by_name: dict[str, Stage] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not self.stages:
            raise DeclarationError(f"domain {self.name!r} declares no stages")
        by_name: dict[str, Stage] = {}
        for stage in self.stages:
            if stage.name in by_name:
                raise DeclarationError(f"domain {self.name!r}: stage {stage.name!r} twice")
            by_name[stage.name] = stage
        for stage in self.stages[:-1]:
            if stage.terminal:
                raise DeclarationError(
                    f"domain {self.name!r}: stage {stage.name!r} is not the last but has no step"
                )
        if not self.stages[-1].terminal:
            raise DeclarationError(
                f"domain {self.name!r}: the last stage {self.stages[-1].name!r} must be terminal"
            )
        unknown = self.owned_fields - set(self.table.c.keys())
        if unknown:
            raise DeclarationError(
                f"domain {self.name!r}: owned fields not in {self.table.name}: {sorted(unknown)}"
            )
        object.__setattr__(self, "_by_name", by_name)

    def stage(self, name: str) -> Stage:
        """The stage called ``name``.

        Raises:
            DeclarationError: no such stage in this domain.
        """
        try:
            return self._by_name[name]
        except KeyError:
            raise DeclarationError(f"domain {self.name!r} has no stage {name!r}") from None

    def next_stage(self, name: str) -> Stage:
        """The stage declared after ``name``.

        Raises:
            DeclarationError: ``name`` is terminal.
        """
        names = [s.name for s in self.stages]
        index = names.index(self.stage(name).name)
        if index + 1 >= len(names):
            raise DeclarationError(f"domain {self.name!r}: {name!r} has no next stage")
        return self.stages[index + 1]

    def is_later(self, earlier: str, later: str) -> bool:
        """True when stage ``later`` is declared after ``earlier``."""
        names = [s.name for s in self.stages]
        return names.index(self.stage(later).name) > names.index(self.stage(earlier).name)

    def lane_stages(self, lane: str) -> list[Stage]:
        """The non-terminal stages whose step runs in ``lane``."""
        return [s for s in self.stages if not s.terminal and s.lane == lane]

    @property
    def lanes(self) -> list[str]:
        """Every lane this domain has work in, in declaration order."""
        seen: list[str] = []
        for stage in self.stages:
            if not stage.terminal and stage.lane not in seen:
                seen.append(stage.lane)
        return seen

    @property
    def terminal_stages(self) -> list[str]:
        """Names of the stages that no step leaves."""
        return [s.name for s in self.stages if s.terminal]
