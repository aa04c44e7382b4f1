"""What the pages say: stages and halt reasons in plain words, durations."""

from __future__ import annotations

from conveyor.halts import known
from conveyor.kinds import SHELL_USER
from conveyor.pipeline import Declaration, Stage
from conveyor.runtime import DECLARATIONS, halt_reasons

__all__ = [
    "duration_words",
    "event_words",
    "halt_words",
    "person_words",
    "resume_helps",
    "stage_words",
]


def _declared(declaration: Declaration, stage: str) -> Stage | None:
    """``declaration``'s stage called ``stage`` (None: one this version does not declare)."""
    return next((s for s in declaration.stages if s.name == stage), None)


def stage_words(domain: str, stage: str) -> str:
    """A stage as a person would say it (``audio``/``media``): its declared words."""
    for declaration in DECLARATIONS:
        if declaration.name == domain:
            declared = _declared(declaration, stage)
            if declared is not None:
                return declared.words or stage
    return stage


def halt_words(reason: str | None) -> str:
    """Why a record was stopped, in plain words: its reason's :attr:`HaltReason.words`
    (the reason code for one this version does not know)."""
    if reason is None:
        return "It was stopped."
    member = known(reason, halt_reasons())
    if member is None:
        return f"It was stopped ({reason.replace('_', ' ')})."
    return member.words


def resume_helps(reason: str | None) -> bool:
    """Whether resuming can help a record stopped for ``reason`` (:attr:`HaltReason.resume_helps`;
    True for a reason this version does not know): when not, the page offers deleting first."""
    member = known(reason, halt_reasons()) if reason is not None else None
    return True if member is None else member.resume_helps


def person_words(name: str) -> str:
    """A user's name in a sentence (``Shared with you by …``): the shell's user ``me`` in
    quotes, so a page does not read as if the reader had shared it."""
    return f"“{name}”" if name == SHELL_USER else name


def duration_words(seconds: float | None) -> str:
    """``42 s``, ``3 min``, ``2 h 5 min``, ``3 d 4 h``; empty for None."""
    if seconds is None:
        return ""
    s = max(0, int(seconds))
    if s < 60:
        return f"{s} s"
    if s < 3600:
        return f"{s // 60} min"
    if s < 86400:
        h, m = divmod(s // 60, 60)
        return f"{h} h {m} min" if m else f"{h} h"
    d, h = divmod(s // 3600, 24)
    return f"{d} d {h} h" if h else f"{d} d"


def event_words(declaration: Declaration, stage: str, outcome: str) -> str:
    """A journal event of one of ``declaration``'s records in plain words (``accepted`` →
    "uploaded", ``failed`` → "a try failed; it will be tried again"); ``advanced`` and
    ``postponed`` at a stage say the stage's declared :attr:`~Stage.advanced_words` and
    :attr:`~Stage.postponed_words` (an audio record's ``advanced`` at ``submitted`` → "speech
    recognised")."""
    declared = _declared(declaration, stage)
    if outcome == "accepted":
        return "uploaded"
    if outcome == "advanced":
        return (declared and declared.advanced_words) or f"moved on from {stage}"
    if outcome == "postponed":
        return (declared and declared.postponed_words) or "waiting a little"
    if outcome == "failed":
        return "a try failed; it will be tried again"
    if outcome == "halted":
        return "stopped"
    if outcome == "resumed":
        return "resumed"
    return outcome.replace("_", " ")
