"""Claims and their fencing tokens (P1-P6).

A claim is the pair (record id, token). The token is a fresh random 128-bit value for every
claim, so a claim re-issued after expiry or a human resume never equals an earlier one and the
earlier holder's conditional writes match nothing (P2, P6).
"""

from __future__ import annotations

import secrets
import threading
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

__all__ = ["Claim", "Held", "mint_token"]


def mint_token() -> str:
    """A new claim token: 128 random bits as 32 hex characters."""
    return secrets.token_hex(16)


@dataclass(frozen=True)
class Claim:
    """What a claim returns: the record's id and this claim's token, nothing else (P1, D7)."""

    record_id: int
    token: str


class Held:
    """The claims one pool holds and has neither saved nor released yet: what a stop releases.

    Thread-safe; keyed by domain name, record id and token.
    """

    def __init__(self) -> None:
        self._claims: dict[tuple[str, int, str], tuple[Any, Claim]] = {}
        self._lock = threading.Lock()

    def add(self, domain: Any, claims: Iterable[Claim]) -> None:
        """Note ``claims`` of ``domain`` (a :class:`~conveyor.pipeline.Domain`) as held."""
        with self._lock:
            for c in claims:
                self._claims[(domain.name, c.record_id, c.token)] = (domain, c)

    def drop(self, domain: Any, claims: Iterable[Claim]) -> None:
        """Forget ``claims``: saved, released or lost."""
        with self._lock:
            for c in claims:
                self._claims.pop((domain.name, c.record_id, c.token), None)

    def all(self) -> list[tuple[Any, Claim]]:
        """Every claim still held, with its domain."""
        with self._lock:
            return list(self._claims.values())
