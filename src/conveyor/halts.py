"""Halt reasons: each owner (the engine, a domain, the recognition providers) declares its own.

A halt keeps the record at its stage until an operator resumes it (P8, P9). Whether a resume can
help depends on the reason: a *content* halt (the file itself is the problem) halts again on
resume, so the way forward is to upload a different file; a *transient* halt (a provider that did
not answer, a database that was down) is resumed once the cause is fixed.

Every reason is a member of a :class:`HaltReason` enum of its owner, carrying its :class:`Guide`:
``conveyor.pipeline.halts.EngineHalt`` (the engine's own: ``stuck``, ``attempts_exhausted``,
``step_error``), ``conveyor.audio.halts.AudioHalt``, ``conveyor.providers.halts.ProviderHalt``
and ``conveyor.media.halts.MediaHalt``. A domain's ``Declaration`` lists the enums its records
halt with (its ``halt_reasons`` add the engine's), and a stored value is read back with
:func:`known` among them. ``Halt(reason: HaltReason)`` makes mypy refuse a reason nobody
declared, and the docs tests iterate the enums (``docs/troubleshooting.md`` has one row per
value).

The same value may belong to two owners (``undecodable`` is both a recording's and a photo's),
each with the way forward of its domain; the database stores the value.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from enum import StrEnum
from typing import Self

__all__ = ["Guide", "HaltReason", "known", "way_forward"]


@dataclass(frozen=True)
class Guide:
    """What a halt reason means and what to do about it.

    Attributes:
        meaning: what happened, in one sentence (for the operator: CLI, logs, docs).
        resume_helps: True when resuming the same record can succeed once the cause is fixed;
            False when the content itself is the problem (resume halts it again).
        action: what to change or do.
        words: the plain words a person reads on the web pages, one or two sentences.
    """

    meaning: str
    resume_helps: bool
    action: str
    words: str


class HaltReason(StrEnum):
    """Base of every owner's halt reasons: a member is its value (stored in ``halt_reason``)
    with its :class:`Guide`. Subclass it with members ``NAME = "value", Guide(...)``."""

    _value_: str
    guide: Guide

    def __new__(cls, value: str, guide: Guide) -> Self:
        member = str.__new__(cls, value)
        member._value_ = value
        member.guide = guide
        return member

    @property
    def meaning(self) -> str:
        """:attr:`Guide.meaning`."""
        return self.guide.meaning

    @property
    def resume_helps(self) -> bool:
        """:attr:`Guide.resume_helps`."""
        return self.guide.resume_helps

    @property
    def action(self) -> str:
        """:attr:`Guide.action`."""
        return self.guide.action

    @property
    def words(self) -> str:
        """:attr:`Guide.words`."""
        return self.guide.words

    def way_forward(self) -> str:
        """One line for a person: whether a resume helps, and what to do."""
        if self.resume_helps:
            return f"resume helps once the cause is fixed: {self.action}"
        return f"resume will not help, the file itself is the problem: {self.action}"


def known(reason: str | None, among: Iterable[type[HaltReason]]) -> HaltReason | None:
    """The declared member for a stored ``reason``, or None (e.g. one from a newer version).

    Args:
        reason: the stored value.
        among: the enums to look in, in order: a domain's ``Declaration.halt_reasons`` (whose
            way forward fits its records), or every domain's (``runtime.halt_reasons()``; a
            value two owners declare then resolves to the first, and a docs test holds their
            plain words in step).
    """
    if not reason:
        return None
    for owner in among:
        for member in owner:
            if member.value == reason:
                return member
    return None


def way_forward(reason: str | None, among: Iterable[type[HaltReason]]) -> str:
    """:meth:`HaltReason.way_forward` of a stored reason (looked up as :func:`known` does); an
    unknown reason counts as transient."""
    member = known(reason, among)
    if member is None:
        return "fix the cause the halt text names, then resume"
    return member.way_forward()
