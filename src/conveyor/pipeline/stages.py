"""Stage descriptors: each stage is declared once; everything else derives from it (D11).

A :class:`Domain` lists its stages in order. From that one list the engine derives the claim
filter of each lane (its non-terminal stages), the lease written at claim time (P4), the
dispatch table (stage → step), the next stage of an :class:`~conveyor.pipeline.Advance`, and
which time limit the stuck watchdog applies (own or foreign work, D3).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Literal

from sqlalchemy import ColumnElement, Engine, Table

from conveyor.config import PipelineSettings, Settings
from conveyor.errors import DeclarationError
from conveyor.halts import HaltReason
from conveyor.pipeline.halts import EngineHalt

if TYPE_CHECKING:
    from conveyor.db.outage import Outage
    from conveyor.pipeline.context import StepContext
    from conveyor.pipeline.outcomes import Outcome

__all__ = ["Declaration", "Domain", "Lane", "Stage", "Step", "Work"]

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
        words: the stage as a person would say it, for the web pages (the name when empty).
        advanced_words: what its step did once it moved a record on, as a record's activity
            list on the web pages says it (``speech recognised``; ``moved on from <name>``
            when empty).
        postponed_words: what a record its step postponed is waiting for, as the activity
            list says it (``still being recognised``; ``waiting a little`` when empty).
    """

    name: str
    step: Step | None = None
    lane: str = "default"
    work: Work = "own"
    lease: float = 300.0
    heartbeat: bool = False
    words: str = ""
    advanced_words: str = ""
    postponed_words: str = ""

    def work_limit(self, settings: PipelineSettings) -> float:
        """Seconds its work may take since the first claim in it before the stuck watchdog
        halts the record (D3): ``[pipeline] own_work_limit`` or ``foreign_work_limit``."""
        if self.work == "foreign":
            return settings.foreign_work_limit
        return settings.own_work_limit

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
        discard: ``(engine, keys)``: removes stored objects that have no journal row; the executor
            hands it what a step produced (:meth:`StepContext.produced_object`) when the step's
            record halted or was deleted while it ran, so no object outlives its step
            without a row.
        outages: the services its steps depend on (the object store's
            :data:`~conveyor.objects.STORAGE`): a step that raises what one of them counts as
            its outage waits for the service instead of failing (see
            :meth:`~conveyor.pipeline.Executor.execute`), so an outage longer than the retry
            pauses spends no attempt.

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
    discard: Callable[[Engine, Sequence[str]], object] | None = None
    outages: Sequence[Outage] = ()
    _by_name: dict[str, Stage] = field(init=False, repr=False, compare=False)
    _index: dict[str, int] = field(init=False, repr=False, compare=False)

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
        # Stage positions, looked up for every outcome (next stage, later than).
        object.__setattr__(self, "_index", {s.name: i for i, s in enumerate(self.stages)})

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
        index = self._index[self.stage(name).name]
        if index + 1 >= len(self.stages):
            raise DeclarationError(f"domain {self.name!r}: {name!r} has no next stage")
        return self.stages[index + 1]

    def is_later(self, earlier: str, later: str) -> bool:
        """True when stage ``later`` is declared after ``earlier``."""
        return self._index[self.stage(later).name] > self._index[self.stage(earlier).name]

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


@dataclass(frozen=True)
class Lane:
    """A lane: workers that run the steps of its stages, as many as one setting says (M7).

    Args:
        name: the lane's name (``audio``, ``short``, ``long``).
        workers: its worker count from the settings, e.g. ``lambda s: s.pipeline.workers``
            (typed: mypy checks the setting exists).
    """

    name: str
    workers: Callable[[Settings], int]


@dataclass(frozen=True)
class Declaration:
    """A domain declared once, without its steps: the one place a stage is added (D11).

    The runtime's lanes, the CLI's progress and the API's stage enums all derive from it; the
    domain's steps are bound at start-up with :meth:`bind`.

    Args:
        name: short name used in events and metrics.
        noun: what people call one row (``record``, ``item``).
        table: the record table.
        stages: every stage in order, without steps; the last one is terminal.
        lanes: the lanes its stages run in, with their settings keys.
        order_by: the claim sort value(s) (P5).
        owned_fields: the only columns steps may write (P7).
        halts: the halt reason enums its steps halt with (:mod:`conveyor.halts`); the engine's
            own (:class:`~conveyor.pipeline.halts.EngineHalt`) apply to every domain.
        outages: the services its steps depend on, whose outage makes a step wait rather than
            fail (:attr:`Domain.outages`).

    Raises:
        DeclarationError: a stage names a lane that is not declared.
    """

    name: str
    table: Table
    stages: Sequence[Stage]
    lanes: Sequence[Lane]
    order_by: Sequence[ColumnElement[object]]
    owned_fields: frozenset[str]
    noun: str = "record"
    halts: Sequence[type[HaltReason]] = ()
    outages: Sequence[Outage] = ()

    def __post_init__(self) -> None:
        declared = {lane.name for lane in self.lanes}
        for stage in self.stages[:-1]:
            if stage.lane not in declared:
                raise DeclarationError(
                    f"domain {self.name!r}: stage {stage.name!r} runs in undeclared lane "
                    f"{stage.lane!r}"
                )

    @property
    def stage_names(self) -> tuple[str, ...]:
        """Every stage's name, in order (the API's and CLI's stage enums)."""
        return tuple(s.name for s in self.stages)

    @property
    def halt_reasons(self) -> tuple[type[HaltReason], ...]:
        """Every enum of reasons its records can halt with: its own, then the engine's."""
        return (*self.halts, EngineHalt)

    def bind(
        self,
        steps: Mapping[str, Step],
        *,
        leases: Mapping[str, float] | None = None,
        discard: Callable[[Engine, Sequence[str]], object] | None = None,
    ) -> Domain:
        """The runnable domain: each non-terminal stage gets its step.

        Args:
            steps: stage name → step, for every stage but the last.
            leases: stage name → lease in seconds, overriding the declared one.
            discard: removes a step's stored objects that have no journal row
                (:attr:`Domain.discard`).

        Raises:
            DeclarationError: a step is missing or names no stage (start-up fails).
        """
        names = set(self.stage_names)
        unknown = set(steps) - names
        if unknown:
            raise DeclarationError(f"domain {self.name!r}: steps for unknown stages {unknown}")
        bound: list[Stage] = []
        for stage in self.stages[:-1]:
            if stage.name not in steps:
                raise DeclarationError(f"domain {self.name!r}: stage {stage.name!r} has no step")
            lease = (leases or {}).get(stage.name, stage.lease)
            bound.append(replace(stage, step=steps[stage.name], lease=lease))
        bound.append(replace(self.stages[-1], step=None))
        return Domain(
            name=self.name,
            noun=self.noun,
            table=self.table,
            stages=bound,
            order_by=self.order_by,
            owned_fields=self.owned_fields,
            discard=discard,
            outages=self.outages,
        )
