"""``Idempotency-Key`` on the upload routes: a retried upload returns the first one's result.

A phone on a bad link often cannot tell whether its upload arrived: the connection dropped
after the last byte, or the 201 was lost. It sends the upload again with the same
``Idempotency-Key`` header (any 1-255 visible ASCII characters, e.g. a UUID), and gets the
record or item the first request created — status 201, the same body, and
``Idempotent-Replayed: true`` — instead of a duplicate. The body of the retry is not read.

The key is the owner's and the route's (``records``, ``albums/3/items``): another owner's key
or another album's never matches. It is written in the same transaction as the record, so of
two copies racing with one key exactly one creates it; the other's stored upload is removed
and it answers with the winner's record. A key lives as long as its record or item (deleting
that frees it). The key alone decides: a different body under a used key gets the first
upload's result.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Final

from fastapi import Header
from sqlalchemy import Connection, Engine
from sqlalchemy.exc import IntegrityError

from conveyor.api import queries
from conveyor.api.errors import ApiError
from conveyor.clock import Clock
from conveyor.error_codes import ErrorCode

__all__ = ["HEADER", "IDEMPOTENCY_KEY", "KEY_PATTERN", "REPLAYED", "IdempotentUpload"]

HEADER: Final = "Idempotency-Key"
#: Response header set when the answer is an earlier request's result.
REPLAYED: Final = "Idempotent-Replayed"
#: What a key may be: 1-255 visible ASCII characters.
KEY_PATTERN: Final = r"^[\x21-\x7e]{1,255}$"
_VALID: Final = re.compile(KEY_PATTERN)

#: The header as a route parameter: documented in the schema, validated (422) by FastAPI.
IDEMPOTENCY_KEY: Final = Header(
    alias=HEADER,
    pattern=KEY_PATTERN,
    max_length=255,
    description=(
        "Any 1-255 visible ASCII characters (a UUID). A retry with the same key returns the "
        "first upload's result (`Idempotent-Replayed: true`) instead of a duplicate."
    ),
)


class IdempotentUpload:
    """The ``Idempotency-Key`` of one upload request (or none).

    Args:
        key: the header's value, or None.
        owner: the account's name.
        scope: the route's scope, e.g. ``records`` or ``albums/3/items``.
        target: ``record`` or ``item``: which id the key names.

    Raises:
        ApiError: 400 ``bad_idempotency_key`` for a key that is empty, too long or not
            visible ASCII.
    """

    def __init__(self, raw: str | None, *, owner: str, scope: str, target: str) -> None:
        self.key: str | None = None
        if raw is not None:
            key = raw.strip()
            if _VALID.fullmatch(key) is None:
                raise ApiError(
                    ErrorCode.BAD_IDEMPOTENCY_KEY,
                    f"{HEADER} must be 1-255 visible ASCII characters (a UUID is a good one)",
                )
            self.key = key
        self.owner = owner
        self.scope = scope
        self.target = target

    def earlier(self, engine: Engine) -> int | None:
        """The id an earlier request with this key created (None without a key or a match)."""
        if self.key is None:
            return None
        with engine.connect() as conn:
            return queries.idempotent_target(conn, owner=self.owner, scope=self.scope, key=self.key)

    def recorder(self, clock: Clock) -> Callable[[Connection, int], None] | None:
        """The intake's ``on_insert`` hook that records the key with the new id (or None)."""
        key = self.key
        if key is None:
            return None

        def record(conn: Connection, new_id: int) -> None:
            ids = {"record_id": new_id} if self.target == "record" else {"item_id": new_id}
            queries.insert_idempotency_key(
                conn, owner=self.owner, scope=self.scope, key=key, now=clock.now(), **ids
            )

        return record

    def winner_of(self, engine: Engine, exc: IntegrityError) -> int:
        """After an upload lost the race for its key: the id the winner created.

        Raises:
            IntegrityError: ``exc`` again when it was not about this key.
        """
        winner = self.earlier(engine)
        if winner is None:
            raise exc
        return winner
