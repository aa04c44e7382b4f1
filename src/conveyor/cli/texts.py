"""The one reading of a text people give on the command line (a title, hints, an album's name, a
user to share with, a note): every such option and argument is read by a :class:`TextParser` of
its :mod:`conveyor.limits` declaration, given as the parameter's ``parser``.

A text the declaration refuses (too long, a control character in one line, a blank name) is a
usage error, exit 2, said while the command line is read: before the command opens the
database or stores anything, with the option and the limit named (``Invalid value for
'--title': a record's title is longer than 300 characters (it has 301)``). The HTTP API checks
the same declarations, so a value one refuses the other refuses too.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import typer

if TYPE_CHECKING:
    from conveyor.limits import TextLimit

__all__ = ["TextParser"]


class TextParser:
    """Reads one text under its limit: the text out, unchanged.

    Args:
        limit: its declaration in :mod:`conveyor.limits`.
    """

    def __init__(self, limit: TextLimit) -> None:
        self.limit = limit
        # Typer names the parameter's type after its parser.
        self.__name__ = "text"

    def __call__(self, value: str) -> str:
        """``value`` when its declaration accepts it.

        Raises:
            typer.BadParameter: what the declaration refuses, said with the limit (click
                names the option: exit 2).
        """
        text = str(value)
        problem = self.limit.problem(text)
        if problem is not None:
            raise typer.BadParameter(f"{self.limit.what} {problem}")
        return text
