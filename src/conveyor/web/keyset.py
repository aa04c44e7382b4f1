"""Keyset order: which rows come before or after a given row in an ORDER BY, and page cursors.

A page of a list ordered by ``(value DESC, id DESC)`` continues after the last row shown, read
from an index in that order, so every page costs the same however many rows precede it (no
OFFSET). The same comparison counts the records a claim takes before a given one (the place in
its queue).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from sqlalchemy import ColumnElement, and_, false, or_
from sqlalchemy.sql import operators
from sqlalchemy.sql.elements import UnaryExpression

from conveyor.api.errors import ApiError
from conveyor.error_codes import ErrorCode

__all__ = ["Order", "comes_after", "comes_before", "cursor_text", "order_terms", "parse_cursor"]

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


def cursor_text(value: float, row_id: int) -> str:
    """A page cursor for the row with sort ``value`` (epoch seconds) and ``row_id``.

    ``repr`` of a float reads back to the same float, so the next page starts exactly there.
    """
    return f"{value!r}_{row_id}"


def parse_cursor(text: str) -> tuple[float, int]:
    """``(value, row_id)`` of a :func:`cursor_text`.

    Raises:
        ApiError: 400 ``bad_cursor`` for anything else.
    """
    value_text, sep, id_text = text.partition("_")
    try:
        if not sep or not id_text.isascii() or not id_text.isdigit():
            raise ValueError(text)
        value, row_id = float(value_text), int(id_text)
    except ValueError:
        raise ApiError(ErrorCode.BAD_CURSOR, "that page link is malformed") from None
    if not math.isfinite(value) or not 1 <= row_id < 2**31:
        raise ApiError(ErrorCode.BAD_CURSOR, "that page link is malformed")
    return value, row_id
