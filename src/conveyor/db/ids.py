"""Which ids a row can have: one declaration per kind of id, bounded by its column's type.

Every id a person or a program names (the CLI's arguments and options, the API's path and query
parameters, an album named by id or name, a worker by id or host) is read against its kind
here, before it reaches a query: a value its column cannot hold (``0``, ``2147483648`` in an
``INTEGER`` column, ``99999999999999999999``) is no row's id, so it is "not found", exactly as
an id no row has, on SQLite (whose rowid would take 64 bits) as on PostgreSQL (whose
``integer`` refuses the value with an error, not an empty answer).
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import BigInteger, Column, Integer, SmallInteger

from conveyor.db.tables import (
    album_events,
    album_links,
    albums,
    api_tokens,
    audio_records,
    media_items,
    record_events,
    worker_processes,
)
from conveyor.errors import NotFound

__all__ = [
    "ALBUM",
    "ALBUM_EVENT",
    "ITEM",
    "KINDS",
    "LINK",
    "RECORD",
    "RECORD_EVENT",
    "TOKEN",
    "WORKER",
    "IdKind",
    "largest_value",
]


def largest_value(column: Column[int]) -> int:
    """The largest integer ``column`` holds on every database Conveyor runs on.

    Raises:
        TypeError: the column is not an integer column.
    """
    kind = column.type
    # BigInteger and SmallInteger are Integer's subclasses: the narrower tests first.
    if isinstance(kind, SmallInteger):
        return 2**15 - 1
    if isinstance(kind, BigInteger):
        return 2**63 - 1
    if isinstance(kind, Integer):
        return 2**31 - 1
    raise TypeError(f"{column} is not an integer column")


@dataclass(frozen=True)
class IdKind:
    """One kind of id: what it is called and the column it is the key of.

    Attributes:
        noun: how a message names one (``record`` in ``record 7 does not exist``).
        column: the primary key column; its type bounds the ids (:func:`largest_value`).
        first: the smallest value that may be named: 1 for a row's id, 0 for an event id
            to continue after (``0`` = the whole history).
    """

    noun: str
    column: Column[int]
    first: int = 1

    @property
    def largest(self) -> int:
        """The largest id a row can have (2147483647 for an ``Integer`` key)."""
        return largest_value(self.column)

    def possible(self, value: int) -> bool:
        """Whether some row could have ``value`` (it is within the column's range)."""
        return self.first <= value <= self.largest

    def check(self, value: int) -> int:
        """``value`` when a row could have it.

        Raises:
            NotFound: ``<noun> <value> does not exist``: no row can have it.
        """
        if not self.possible(value):
            raise NotFound(f"{self.noun} {value} does not exist")
        return value

    def parse(self, text: str) -> int | None:
        """``text`` as an id a row could have: ASCII digits (spaces around them allowed)
        within range; None for anything else (a name, a number no row can have)."""
        text = text.strip()
        # ASCII only: str.isdigit takes "²" and "١٢", which int() refuses or reads otherwise.
        if not (text.isascii() and text.isdigit()) or len(text) > 30:
            return None
        value = int(text)
        return value if self.possible(value) else None


RECORD = IdKind("record", audio_records.c.id)
ITEM = IdKind("item", media_items.c.id)
ALBUM = IdKind("album", albums.c.id)
TOKEN = IdKind("token", api_tokens.c.id)
LINK = IdKind("link", album_links.c.id)
WORKER = IdKind("worker process", worker_processes.c.id)
ALBUM_EVENT = IdKind("album event", album_events.c.id, first=0)
RECORD_EVENT = IdKind("record event", record_events.c.id, first=0)

#: Every kind, for the tests that try each one's edges.
KINDS = (RECORD, ITEM, ALBUM, TOKEN, LINK, WORKER, ALBUM_EVENT, RECORD_EVENT)
