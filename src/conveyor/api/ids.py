"""The one reading of an id in a path or a query: ``Annotated[int, Path(...), IdOf(RECORD)]``.

A whole number no row of the kind can have (``0``, past its column's range such as
``2147483648``, ``99999999999999999999``) answers 404 ``not_found``, ``record 2147483648 does
not exist``, as an id no row has does, on SQLite as on PostgreSQL (whose ``integer`` column
refuses such a value with an error); text that is not a whole number stays 422
``invalid_request``. The kinds and their bounds are :mod:`conveyor.db.ids`'.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import Path, Query
from pydantic import GetCoreSchemaHandler
from pydantic_core import PydanticCustomError, core_schema

from conveyor.db.ids import ALBUM, ALBUM_EVENT, ITEM, LINK, RECORD, IdKind

__all__ = ["NO_SUCH_ID", "AlbumEventAfter", "AlbumId", "IdOf", "ItemId", "LinkId", "RecordId"]

#: The validation error type of an id no row can have, answered 404 by ``api.errors``.
NO_SUCH_ID = "no_such_id"

# Digits past this many are no id of any kind; int() of thousands of them is refused anyway.
_DIGITS = 30


class IdOf:
    """Pydantic metadata that reads an ``int`` parameter as an id of ``kind``.

    Used inside ``Annotated`` beside FastAPI's ``Path``/``Query``; its validators do the
    range check (the parameter itself takes any integer, so no 422 for one out of range).
    """

    def __init__(self, kind: IdKind) -> None:
        self.kind = kind

    def _missing(self, shown: object) -> PydanticCustomError:
        return PydanticCustomError(
            NO_SUCH_ID, "{noun} {value} does not exist", {"noun": self.kind.noun, "value": shown}
        )

    def _before(self, value: Any) -> Any:
        if isinstance(value, str):
            text = value.strip()
            if text.isascii() and text.isdigit() and len(text) > _DIGITS:
                raise self._missing(text)
        return value

    def _after(self, value: int | None) -> int | None:
        if value is not None and not self.kind.possible(value):
            raise self._missing(value)
        return value

    def __get_pydantic_core_schema__(
        self, source: Any, handler: GetCoreSchemaHandler
    ) -> core_schema.CoreSchema:
        """The integer's own schema, between the two checks (pydantic's hook)."""
        return core_schema.no_info_before_validator_function(
            self._before, core_schema.no_info_after_validator_function(self._after, handler(source))
        )


def _range(kind: IdKind) -> str:
    return f"{kind.first} to {kind.largest}; any other number answers 404"


RecordId = Annotated[int, Path(description=f"The record's id ({_range(RECORD)})."), IdOf(RECORD)]
ItemId = Annotated[int, Path(description=f"The item's id ({_range(ITEM)})."), IdOf(ITEM)]
AlbumId = Annotated[int, Path(description=f"The album's id ({_range(ALBUM)})."), IdOf(ALBUM)]
LinkId = Annotated[int, Path(description=f"The link's id ({_range(LINK)})."), IdOf(LINK)]
AlbumEventAfter = Annotated[
    int | None,
    Query(
        description=f"Same as the header; 0 = the whole history ({_range(ALBUM_EVENT)}).",
    ),
    IdOf(ALBUM_EVENT),
]
