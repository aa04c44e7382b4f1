"""Keyset order: which rows come before or after a given row in an ORDER BY.

A page of a list ordered by ``(value DESC, id DESC)`` continues after the last row shown, read
from an index in that order, so every page costs the same however many rows precede it (no
OFFSET). The same comparison counts the records a claim takes before a given one (the place in
its queue). The page cursors that carry a row's order values are ``conveyor.web.keyset``'s.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import ColumnElement, and_, false, or_
from sqlalchemy.sql import operators
from sqlalchemy.sql.elements import UnaryExpression

__all__ = ["Order", "comes_after", "comes_before", "order_terms"]

Order = Sequence[tuple[ColumnElement[Any], bool]]
"""``(column, descending)`` pairs, most significant first, ending with a unique column."""


def order_terms(order_by: Sequence[ColumnElement[Any]]) -> list[tuple[ColumnElement[Any], bool]]:
    """An ORDER BY list (``col``, ``col.desc()``, ``col.asc()``) as ``(column, descending)``."""
    terms: list[tuple[ColumnElement[Any], bool]] = []
    for term in order_by:
        if isinstance(term, UnaryExpression) and term.modifier in (
            operators.desc_op,
            operators.asc_op,
        ):
            terms.append((term.element, term.modifier is operators.desc_op))
        else:
            terms.append((term, False))
    return terms


def _lexicographic(order: Order, values: Sequence[Any], *, before: bool) -> ColumnElement[bool]:
    alternatives: list[ColumnElement[bool]] = []
    equal: list[ColumnElement[bool]] = []
    for (column, descending), value in zip(order, values, strict=True):
        # "Before" in a descending order means a larger value.
        step = column > value if descending == before else column < value
        alternatives.append(and_(*equal, step))
        equal.append(column == value)
    return or_(false(), *alternatives)


def comes_before(order: Order, values: Sequence[Any]) -> ColumnElement[bool]:
    """Rows sorted strictly before the row whose order values are ``values``."""
    return _lexicographic(order, values, before=True)


def comes_after(order: Order, values: Sequence[Any]) -> ColumnElement[bool]:
    """Rows sorted strictly after the row whose order values are ``values`` (the next page)."""
    return _lexicographic(order, values, before=False)
