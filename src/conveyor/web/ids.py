"""Ids in a page's address: the kinds of :mod:`conveyor.db.ids`, read as the API reads them
(:class:`conveyor.api.ids.IdOf`), except that any text that is no id of its kind is "not
found", the page's normal 404 ("There is nothing here, or it is not yours."), never a 422 or
a 500: ``0``, ``-1``, ``2147483648``, ``99999999999999999999`` and ``abc`` alike. An address
is what a person types or edits, so a wrong one is a missing page, not a malformed request.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import Path

from conveyor.api.ids import IdOf
from conveyor.db.ids import ALBUM, ITEM, LINK, RECORD, TOKEN

__all__ = ["AlbumId", "ItemId", "LinkId", "PageIdOf", "RecordId", "TokenId"]

# Enough of a wrong value to name it in the message, no more (it is the client's text).
_SHOWN = 40


class PageIdOf(IdOf):
    """:class:`~conveyor.api.ids.IdOf` for a page's path: text that is not a whole number a
    row of the kind could have (:meth:`~conveyor.db.ids.IdKind.parse`) is missing too."""

    def _before(self, value: Any) -> Any:
        if isinstance(value, str) and self.kind.parse(value) is None:
            raise self._missing(value.strip()[:_SHOWN])
        return value


RecordId = Annotated[int, Path(), PageIdOf(RECORD)]
ItemId = Annotated[int, Path(), PageIdOf(ITEM)]
AlbumId = Annotated[int, Path(), PageIdOf(ALBUM)]
LinkId = Annotated[int, Path(), PageIdOf(LINK)]
TokenId = Annotated[int, Path(), PageIdOf(TOKEN)]
