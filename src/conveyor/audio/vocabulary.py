"""Vocabulary hints: an owner's standing names and terms, merged with a record's own.

An owner keeps one vocabulary (``conveyor vocabulary set``, ``PUT /api/vocabulary``) that applies
to every recording of theirs, past ones still waiting for recognition included; a record may carry
hints of its own (``ingest --hints``, the upload's ``hints``). The recognizer gets both, merged by
:func:`merge_hints`: the owner's terms first, the record's last, each term once. The record's come
last because Whisper keeps the END of a prompt that is too long for it (about 224 tokens), and the
record's own terms are the more specific ones.
"""

from __future__ import annotations

import re

from sqlalchemy import Connection, Engine

from conveyor.audio import queries
from conveyor.audio.intake import MAX_HINTS, clean_hints
from conveyor.clock import Clock

__all__ = ["MAX_HINTS", "merge_hints", "owner_vocabulary", "set_owner_vocabulary"]

# Terms are separated by commas, semicolons or line breaks; within a term, words stay together.
_SEPARATORS = re.compile(r"[,;\n]")


def owner_vocabulary(conn: Connection, owner: str) -> str | None:
    """The owner's standing vocabulary hints, or None when they have none."""
    row = queries.owner_vocabulary_of(conn, owner)
    return str(row["hints"]) if row is not None else None


def set_owner_vocabulary(engine: Engine, clock: Clock, owner: str, hints: str | None) -> str | None:
    """Replace the owner's vocabulary (whitespace collapsed); empty or None removes it.

    Returns:
        The vocabulary as stored, or None when removed.

    Raises:
        RejectedInput: ``bad_hints``: longer than :data:`MAX_HINTS` characters or with control
            characters (line breaks are allowed and become spaces).
    """
    cleaned = clean_hints(hints, vocabulary=True)
    with engine.begin() as conn:
        queries.set_owner_vocabulary(conn, owner, cleaned, clock.now())
    return cleaned


def merge_hints(owner: str | None, record: str | None) -> str | None:
    """One hint text from the owner's vocabulary and the record's hints, or None when neither.

    Terms (split at commas, semicolons and line breaks) keep their order, the owner's first and
    the record's last; a term given twice (ignoring case and surrounding spaces) appears once,
    at its last place.
    """
    terms: list[str] = []
    for text in (owner, record):
        for term in _SEPARATORS.split(text or ""):
            term = " ".join(term.split())
            if not term:
                continue
            terms = [t for t in terms if t.casefold() != term.casefold()]
            terms.append(term)
    return ", ".join(terms) or None
