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

__all__ = ["MAX_DIGITS", "header_int"]

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
