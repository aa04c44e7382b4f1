"""The pipeline engine: stage declarations, claims, outcomes, watchdogs, workers and lanes.

Public surface::

    Declaration, Lane              declare a domain once, steps bound at start-up (D11)
    Stage, Domain, Step            a domain's stages and the runnable domain
    StepContext                    what a step receives
    Advance, Postpone, Fail, Halt  what a step returns (P6-P10, D6)
    Executor                       runs one claimed step
    WorkerPool, Lane               N identical workers per lane (D8, M7, M8)
    resume                         the operator's way back from a halt (P9)
    halted_ids, resume_many        bulk: freeze the halted set, resume exactly that set

Each name is imported from its module on first use (PEP 562), so importing one module of the
engine (a declaration's :mod:`~conveyor.pipeline.stages`) does not load the rest: the running
engine (threads, the completer, Prometheus metrics) stays out of a process that only reads
records (``conveyor records list``).
"""

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from conveyor.pipeline.claims import Claim
    from conveyor.pipeline.context import StepContext
    from conveyor.pipeline.executor import Executor
    from conveyor.pipeline.lifecycle import Resumed, halted_ids, resume, resume_many
    from conveyor.pipeline.outcomes import Advance, Fail, Halt, Outcome, Postpone
    from conveyor.pipeline.pool import WorkerPool
    from conveyor.pipeline.stages import Declaration, Domain, Lane, Stage, Step, Work

#: Each public name's module, imported on first use.
_HOME = {
    **dict.fromkeys(["Claim"], "claims"),
    **dict.fromkeys(["StepContext"], "context"),
    **dict.fromkeys(["Executor"], "executor"),
    **dict.fromkeys(["Resumed", "halted_ids", "resume", "resume_many"], "lifecycle"),
    **dict.fromkeys(["Advance", "Fail", "Halt", "Outcome", "Postpone"], "outcomes"),
    **dict.fromkeys(["WorkerPool"], "pool"),
    **dict.fromkeys(["Declaration", "Domain", "Lane", "Stage", "Step", "Work"], "stages"),
}


def __getattr__(name: str) -> object:
    if name not in _HOME:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{_HOME[name]}"), name)
    globals()[name] = value  # asked once
    return value


__all__ = [
    "Advance",
    "Claim",
    "Declaration",
    "Domain",
    "Executor",
    "Fail",
    "Halt",
    "Lane",
    "Outcome",
    "Postpone",
    "Resumed",
    "Stage",
    "Step",
    "StepContext",
    "Work",
    "WorkerPool",
    "halted_ids",
    "resume",
    "resume_many",
]
