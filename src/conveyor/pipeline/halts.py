"""The engine's own halt reasons; each domain declares its reasons beside its steps."""

from __future__ import annotations

from conveyor.halts import Guide, HaltReason

__all__ = ["EngineHalt"]


class EngineHalt(HaltReason):
    """Why the engine itself halts a record, in any domain (P8, P10, D3)."""

    STUCK = (
        "stuck",
        Guide(
            meaning="the record stayed in one stage longer than `[pipeline] own_work_limit` "
            "(our work) or `foreign_work_limit` (waiting on a provider)",
            resume_helps=True,
            action="resume it; if it halts stuck again, read the log around it (a provider that "
            "never answers, a worker killed mid-step, a step that hung: restart that worker) "
            "or raise the limit",
            words="It took far longer than it should at this stage, so it was stopped rather "
            "than left hanging.",
        ),
    )
    ATTEMPTS_EXHAUSTED = (
        "attempts_exhausted",
        Guide(
            meaning="one step failed `[pipeline] max_attempts` times in a row; the halt text "
            "quotes the last error",
            resume_helps=True,
            action="fix what the last error names (database, storage, provider, model; "
            "'worker lost': the step crashed, hung or cut off its worker process each time, "
            "see that worker's log), then resume",
            words="It failed several times in a row, so it was stopped.",
        ),
    )
    STEP_ERROR = (
        "step_error",
        Guide(
            meaning="a step returned an outcome its stage does not allow (a fault of Conveyor)",
            resume_helps=True,
            action="report it with the halt text; resume after upgrading to a version with the fix",
            words="An unexpected error stopped it.",
        ),
    )
