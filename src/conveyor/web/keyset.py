"""Page cursors of keyset-ordered lists: a row's sort value and id, as the next page's link.

The order itself (which rows come after that row) is :mod:`conveyor.db.keyset`.
"""

from __future__ import annotations

import math

from conveyor.api.errors import ApiError
from conveyor.error_codes import ErrorCode

__all__ = ["cursor_text", "parse_cursor"]


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
