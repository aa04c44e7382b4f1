"""The one reading of an id on the command line: every id argument and option is read by an
:class:`IdParser` of its kind (:mod:`conveyor.db.ids`), given as the parameter's ``parser``.

Text that is not a whole number is a usage error (exit 2). A whole number no row can have (``0``,
one past its column's range such as ``2147483648``, ``99999999999999999999``) is refused as the
missing id it is: ``record 2147483648 does not exist``, exit 3, before the command opens the
database or changes anything, on SQLite as on PostgreSQL (whose ``integer`` column would
refuse it with an error, not an empty answer). Of several ids, one such refuses them all.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from conveyor.cli.exits import ExitCode
from conveyor.cli.output import fail

if TYPE_CHECKING:
    from conveyor.db.ids import IdKind

__all__ = ["IdParser"]

# Digits past this many are no id of any kind; int() of thousands of them is refused anyway.
_DIGITS = 30


class IdParser:
    """Reads the text of one id of a kind: ``int`` out.

    Args:
        kind: the name of an :class:`~conveyor.db.ids.IdKind` of :mod:`conveyor.db.ids`
            (``"RECORD"``), looked up when a value is read, so that ``--help`` loads no
            SQLAlchemy.
    """

    def __init__(self, kind: str) -> None:
        self.kind_name = kind
        # Typer names the parameter's type after its parser.
        self.__name__ = "integer"

    @property
    def kind(self) -> IdKind:
        """The kind of id this parser reads."""
        from conveyor.db import ids

        kind = getattr(ids, self.kind_name)
        assert isinstance(kind, ids.IdKind), self.kind_name
        return kind

    def __call__(self, value: str) -> int:
        """``value`` as an id of this kind.

        Raises:
            ValueError: not a whole number in ASCII digits (click says so: exit 2).
            typer.Exit: ``NOT_FOUND``, a whole number no row of this kind can have.
        """
        text = str(value).strip()
        if not (text.isascii() and text.isdigit()):
            raise ValueError(f"{value!r} is not an id (a whole number, e.g. 7)")
        if len(text) > _DIGITS or not self.kind.possible(int(text)):
            raise fail(f"{self.kind.noun} {text} does not exist", ExitCode.NOT_FOUND)
        return int(text)
