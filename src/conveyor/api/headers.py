"""Numbers in request headers, parsed by HTTP's rules: ASCII digits only, bounded length.

Python's ``str.isdigit`` and ``int`` accept far more than RFC 9110's ``1*DIGIT``:
superscripts (``"²".isdigit()`` is True, ``int("²")`` fails), other scripts' digits
(``int("١٢")`` is 12), underscores (``int("1_0")``) and surrounding blanks. A header must not
mean something different here than in every proxy in front of us, and must never reach a
conversion that can raise, so every numeric header goes through :func:`header_int`.
"""

from __future__ import annotations

import re
from typing import Final

from conveyor.api.errors import ApiError
from conveyor.db.ids import IdKind
from conveyor.error_codes import ErrorCode
from conveyor.errors import NotFound

__all__ = ["MAX_DIGITS", "header_int", "last_event_id"]

#: Digits accepted in one number: 2**63 - 1 has 19, so anything longer is out of every range
#: we use (and Python's int() refuses strings over 4300 digits with an exception).
MAX_DIGITS: Final = 19

_DIGITS: Final = re.compile(r"[0-9]{1,19}")


def header_int(value: str | bytes | None) -> int | None:
    """The non-negative integer a header field (or part of one) spells, or None.

    Args:
        value: the text, already stripped of the surrounding optional whitespace the header's
            grammar allows; bytes are read as Latin-1.

    Returns:
        The number for 1 to :data:`MAX_DIGITS` ASCII digits and nothing else; None otherwise
        (empty, a sign, blanks inside, non-ASCII digits, too long).
    """
    if value is None:
        return None
    if isinstance(value, bytes):
        value = value.decode("latin-1")
    if _DIGITS.fullmatch(value) is None:
        return None
    return int(value)


def last_event_id(header: str, kind: IdKind) -> int:
    """The ``Last-Event-ID`` a reconnecting client sent, an event id of ``kind``: ASCII digits,
    or 400.

    A value that is not a number is refused rather than read as "no id": silently restarting
    from the newest event would drop every event the client missed. A number no event of the
    kind can have (past its column's range: ``2147483648``, ``2**63``, ``10**20``) is not
    found, as :mod:`conveyor.db.ids` reads every id (the ``?last_event_id=`` parameter too).

    Raises:
        ApiError: 400 ``bad_last_event_id`` for anything but ASCII digits.
        NotFound: ``album event 2147483648 does not exist``, answered 404 ``not_found``.
    """
    text = header.strip()
    if not (text.isascii() and text.isdigit()):
        raise ApiError(
            ErrorCode.BAD_LAST_EVENT_ID,
            "Last-Event-ID must be the decimal id of an event this stream sent (ASCII digits)",
        )
    value = kind.parse(text)
    if value is None:
        raise NotFound(f"{kind.noun} {text} does not exist")
    return value
